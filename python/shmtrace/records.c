/* SPDX-License-Identifier: MIT */
/*
 * records.c - the other record calls of a tracer: instant, counter, trigger, flow ids,
 * thread and process names, flush, and stats() with its Stats type.
 */
#include "_shmtrace.h"

PYST_DOC(pyst_instant_doc,
"instant(name, cat=None, flow=None, args=None) -> None\n"
"--\n\n"
"Records an instant event now: a point in time, with an optional flow id\n"
"(an \"error\" or \"retry\" of one request; None: the current flow) and\n"
"arguments (a dict of at most 4, as for span()). Arguments as for span().");

PyObject *pyst_instant(Tracer *tr, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
	struct shmtrace_arg av[SHMTRACE_MAX_ARGS];
	PyObject *a[4], *vals[SHMTRACE_MAX_ARGS] = { NULL };
	uint32_t cat, name, n;
	uint64_t flow;
	int ret;

	if (pyst_event_args("instant", args, nargs, kwnames, a, &flow) < 0)
		return NULL;
	if (!pyst_enabled(tr)) {
		if (pyst_args_of(NULL, a[3], av, NULL, &n) < 0)
			return NULL;
		Py_RETURN_NONE;
	}
	if (pyst_intern_name_cat(tr, a[0], a[1], &name, &cat) < 0)
		return NULL;
	ret = pyst_args_of(tr, a[3], av, vals, &n);
	/* interning let other threads run: closed meanwhile, it is off */
	if (ret == 0 && tr->t) {
		if (!a[2] || a[2] == Py_None)
			flow = pyst_current_flow();
		shmtrace_instant_args(tr->t, cat, name, flow, av, n);
	}
	/* the texts were read by the call */
	pyst_vals_clear(vals);
	if (ret < 0)
		return NULL;
	Py_RETURN_NONE;
}

PYST_DOC(pyst_counter_doc,
"counter(name, value, cat=None) -> None\n"
"--\n\n"
"Records the value of counter name now (an int in -2**63..2**63-1, or any\n"
"object with __index__); viewers draw it as a graph per process. Raises\n"
"TypeError for a value that is not an integer, OverflowError out of range.");

PyObject *pyst_counter(Tracer *tr, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
	PyObject *keys[3] = { pyst_str_name, pyst_str_value, pyst_str_cat }, *a[3];
	uint32_t cat, name;
	long long value;

	if (pyst_parse_args("counter", args, nargs, kwnames, keys, 3, 2, a) < 0)
		return NULL;
	if (pyst_check_name_cat(a[0], a[2]) < 0)
		return NULL;
	if (PyFloat_Check(a[1]) || !PyIndex_Check(a[1])) {
		PyErr_Format(PyExc_TypeError, "value must be int, not %.100s", Py_TYPE(a[1])->tp_name);
		return NULL;
	}
	value = PyLong_AsLongLong(a[1]);
	if (value == -1 && PyErr_Occurred())
		return NULL;
	if (!pyst_enabled(tr))
		Py_RETURN_NONE;
	if (pyst_intern_name_cat(tr, a[0], a[2], &name, &cat) < 0)
		return NULL;
	if (tr->t)	/* interning let other threads run: one may have closed it */
		shmtrace_counter(tr->t, cat, name, value);
	Py_RETURN_NONE;
}

PYST_DOC(pyst_trigger_doc,
"trigger(name) -> None\n"
"--\n\n"
"Asks for the ring's recent past to be saved: records a trigger named name\n"
"now (an instant \"trigger: NAME\" of this thread in every export) and wakes\n"
"shmtrace-collector --flight-recorder, which writes a snapshot of what the\n"
"ring holds before it (--keep) and after it (--after) into a file of its\n"
"own, at most --max-per-hour of them. As cheap as an instant: call it where\n"
"the rare event is found (a timeout, a bad reply). Raises shmtrace.Error for\n"
"a ring made by a shmtrace older than triggers; nothing when tracing is off.");

PyObject *pyst_trigger(Tracer *tr, PyObject *arg)
{
	char buf[MAX_STRING + 1];
	const char *u;
	Py_ssize_t len;
	int ret, ok;

	u = pyst_utf8_of(arg, "name", &len);
	if (!u)
		return NULL;
	if (!pyst_enabled(tr))
		Py_RETURN_NONE;
	/* cut at a character, as every name: the library cuts at a byte */
	pyst_copy_cut(buf, u, len, MAX_STRING);
	/* interned first, the lock waited for without the GIL: the
	 * library's intern of it then finds it in its cache */
	pyst_intern(tr, arg, "name", &ok);
	if (!ok)
		return NULL;
	if (!tr->t)
		Py_RETURN_NONE;
	ret = shmtrace_trigger(tr->t, buf, 0);
	/* a ring too old to hold one: said, as nothing was recorded; other
	 * failures are the ring's, counted there as for any record */
	if (ret == -EOPNOTSUPP)
		return pyst_raise(ret, NULL);
	Py_RETURN_NONE;
}

PYST_DOC(pyst_flow_new_doc,
"flow_new() -> int\n"
"--\n\n"
"Returns a new flow id, unique among all processes of the ring, never 0\n"
"and below 2**53 (exact in JavaScript viewers). Send it along with a\n"
"request and pass it as flow= to the span of each hop. 0 when tracing is off.");

PyObject *pyst_flow_new(Tracer *tr, PyObject *Py_UNUSED(ignored))
{
	return PyLong_FromUnsignedLongLong(tr->t ? shmtrace_flow_new(tr->t) : 0);
}

PyObject *pyst_set_name(Tracer *tr, PyObject *arg, int process)
{
	char buf[MAX_NAME + 1];
	const char *u;
	Py_ssize_t len;
	int ret;

	u = pyst_utf8_of(arg, "name", &len);
	if (!u)
		return NULL;
	if (!tr->t)
		Py_RETURN_NONE;
	pyst_copy_cut(buf, u, len, MAX_NAME);
	if (process) {
		/* a name slot holds both names, and the last one wins: the
		 * thread's own name goes in first */
		if (!pyst_tls_named)
			pyst_name_thread(tr);
	} else {
		pyst_tls_named = 1;	/* the caller's name wins over threading's */
	}
	/* the lock waited for without the GIL (tracer.c) */
	ret = 0;
	PYST_HOLDING(tr, t, ret = process ? shmtrace_set_process_name(t, buf) :
					    shmtrace_set_thread_name(t, buf));
	/* a name with no room in the ring's table, or that could not wait
	 * for its lock, is counted there (names_dropped): a program's flow is
	 * not the tracer's to change */
	if (ret < 0 && ret != -ENOSPC && ret != -ETIMEDOUT)
		return pyst_raise(ret, NULL);
	Py_RETURN_NONE;
}

/* CPython wants one function and one docstring per method: the pairs
 * below share a shape and differ in their text and the call they make. */
PYST_DOC(pyst_set_thread_name_doc,
"set_thread_name(name) -> None\n"
"--\n\n"
"Names the calling thread in the trace (at most 31 bytes of UTF-8, cut at\n"
"a character boundary). Without it a thread is named after\n"
"threading.current_thread().name when it first records. The same name\n"
"again takes no new slot of the ring's name table; a name the full table\n"
"has no room for, or that could not wait for the ring lock, is counted in\n"
"the ring (names_dropped), not raised.");

PyObject *pyst_set_thread_name(Tracer *tr, PyObject *arg)
{
	return pyst_set_name(tr, arg, 0);
}

PYST_DOC(pyst_set_process_name_doc,
"set_process_name(name) -> None\n"
"--\n\n"
"Names the calling process in the trace (at most 31 bytes of UTF-8).\n"
"Without it the kernel's name (comm, e.g. \"python3\") is shown. A name\n"
"the full table has no room for, or that could not wait for the ring\n"
"lock, is counted in the ring, not raised.");

PyObject *pyst_set_process_name(Tracer *tr, PyObject *arg)
{
	return pyst_set_name(tr, arg, 1);
}

PYST_DOC(pyst_flush_doc,
"flush() -> None\n"
"--\n\n"
"Moves the calling thread's staged records into the ring now. Never needed\n"
"for durability (a record survives its process as soon as the call that\n"
"wrote it returns); it makes records visible to the collector sooner.\n"
"Raises shmtrace.Error (ETIMEDOUT) when the ring lock is wedged.");

PyObject *pyst_flush(Tracer *tr, PyObject *Py_UNUSED(ignored))
{
	int ret = 0;

	/* the lock waited for without the GIL, as an intern's (tracer.c) */
	PYST_HOLDING(tr, t, ret = shmtrace_flush(t));
	if (ret < 0)
		return pyst_raise(ret, NULL);
	Py_RETURN_NONE;
}

PYST_DOC(pyst_stats_doc,
"stats() -> Stats | None\n"
"--\n\n"
"The ring's counters: capacity, head (records ever published), tail\n"
"(records the collector consumed), dropped, overwritten, lock_timeouts,\n"
"mode (\"discard\" or \"overwrite\") and strings (interned). None when\n"
"tracing is off.");

PyObject *pyst_stats(Tracer *tr, PyObject *Py_UNUSED(ignored))
{
	struct shmtrace_stats st;
	PyObject *r;
	int ret;

	if (!tr->t)
		Py_RETURN_NONE;
	ret = shmtrace_stats(tr->t, &st);
	if (ret < 0)
		return pyst_raise(ret, NULL);
	r = PyStructSequence_New(&pyst_stats_type);
	if (!r)
		return NULL;
	PyStructSequence_SET_ITEM(r, 0, PyLong_FromUnsignedLongLong(st.capacity));
	PyStructSequence_SET_ITEM(r, 1, PyLong_FromUnsignedLongLong(st.head));
	PyStructSequence_SET_ITEM(r, 2, PyLong_FromUnsignedLongLong(st.tail));
	PyStructSequence_SET_ITEM(r, 3, PyLong_FromUnsignedLongLong(st.dropped));
	PyStructSequence_SET_ITEM(r, 4, PyLong_FromUnsignedLongLong(st.overwritten));
	PyStructSequence_SET_ITEM(r, 5, PyLong_FromUnsignedLongLong(st.lock_timeouts));
	PyStructSequence_SET_ITEM(r, 6, PyUnicode_FromString(
		st.mode == SHMTRACE_MODE_OVERWRITE ? "overwrite" : "discard"));
	PyStructSequence_SET_ITEM(r, 7, PyLong_FromUnsignedLong(st.strings));
	for (Py_ssize_t i = 0; i < 8; i++) {
		if (!PyStructSequence_GET_ITEM(r, i)) {
			Py_DECREF(r);
			return NULL;
		}
	}
	return r;
}

PyTypeObject pyst_stats_type;	/* made by PyStructSequence_InitType2() at init */

static PyStructSequence_Field stats_fields[] = {
	{ "capacity", "records the ring holds" },
	{ "head", "records ever published into the ring" },
	{ "tail", "records the collector has consumed" },
	{ "dropped", "records discarded because the ring was full" },
	{ "overwritten", "records overwritten unread (overwrite mode)" },
	{ "lock_timeouts", "flushes given up on a lock held too long" },
	{ "mode", "\"discard\" or \"overwrite\"" },
	{ "strings", "interned strings" },
	{ NULL, NULL }
};

PyStructSequence_Desc pyst_stats_desc = {
	"shmtrace.Stats", "The ring's counters, from stats().", stats_fields, 8
};
