/* SPDX-License-Identifier: MIT */
/*
 * _shmtrace.c - the module shmtrace._shmtrace: its init, the calls that
 * open, create and remove rings, and the module-level record calls, which
 * are the Tracer's on the default tracer.
 */
#include "_shmtrace.h"

#include <string.h>

PyObject *pyst_error;
Tracer *pyst_default_tracer;
Span *pyst_null_span;
PyObject *pyst_str_name, *pyst_str_cat, *pyst_str_flow, *pyst_str_value, *pyst_str_args,
	*pyst_str_default_cat;
PyObject *pyst_flow_var;

PyDoc_STRVAR(open_doc,
"open(ring=None) -> Tracer\n"
"--\n\n"
"Attaches to the ring /dev/shm/<ring> (made by shmtrace-collector --create\n"
"or create_ring()) and returns a Tracer. ring=None takes the name from the\n"
"environment variable SHMTRACE_RING; when that is unset or empty the\n"
"tracer is off: every call on it is a cheap no-op.\n\n"
"Raises shmtrace.Error (an OSError) with the library's message: errno\n"
"ENOENT when there is no such ring, EPROTO for a segment that is not a\n"
"ring, ENODEV for a name that is not a regular file, EPERM for one owned\n"
"by another user, EINVAL for a bad name.");

static PyObject *mod_open(PyObject *m, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
	PyObject *keys[1] = { NULL }, *a[1], *ringobj;
	const char *ring;
	Py_ssize_t len;
	shmtrace_t *t = NULL;
	Tracer *tr;
	int ret;

	(void)m;
	keys[0] = PyUnicode_InternFromString("ring");
	if (!keys[0])
		return NULL;
	ret = pyst_parse_args("open", args, nargs, kwnames, keys, 1, 0, a);
	Py_DECREF(keys[0]);
	if (ret < 0)
		return NULL;
	ringobj = a[0];
	if (!ringobj || ringobj == Py_None) {
		const char *env = getenv("SHMTRACE_RING");

		if (!env || !*env)
			return (PyObject *)pyst_tracer_new(NULL, 0, NULL);
		ringobj = PyUnicode_DecodeFSDefault(env);
		if (!ringobj)
			return NULL;
	} else {
		Py_INCREF(ringobj);
	}
	ring = pyst_utf8_of(ringobj, "ring", &len);
	if (!ring) {
		Py_DECREF(ringobj);
		return NULL;
	}
	Py_BEGIN_ALLOW_THREADS
	ret = shmtrace_open(ring, &t);
	Py_END_ALLOW_THREADS
	if (ret < 0) {
		pyst_raise(ret, ringobj);
		Py_DECREF(ringobj);
		return NULL;
	}
	tr = pyst_tracer_new(t, 1, ringobj);
	Py_DECREF(ringobj);
	if (!tr)
		shmtrace_close(t);
	return (PyObject *)tr;
}

PyDoc_STRVAR(create_ring_doc,
"create_ring(ring, capacity=0, mode=\"discard\") -> None\n"
"--\n\n"
"Creates the ring /dev/shm/<ring> (usually shmtrace-collector --create\n"
"does): capacity records, a power of two from 2 to 16777216 (2**24), or 0\n"
"for 262144; mode \"discard\" drops new records when full, \"overwrite\"\n"
"keeps the newest. Raises OverflowError for a capacity that is negative\n"
"or beyond 2**32 - 1, ValueError for one that is not such a power of two,\n"
"shmtrace.Error: EEXIST if it exists, EINVAL for a bad name.");

/* The capacity argument, checked as shmtrace_ring_create() checks it,
 * never cut to 32 bits. Returns 0, or -1 with an exception set. */
static int capacity_of(PyObject *o, uint32_t *cap)
{
	unsigned long long v;

	*cap = 0;
	if (!o)
		return 0;
	v = PyLong_AsUnsignedLongLong(o);
	if (v == (unsigned long long)-1 && PyErr_Occurred()) {
		if (!PyErr_ExceptionMatches(PyExc_OverflowError))
			return -1;	/* not an int: the TypeError stands */
		PyErr_Clear();
	} else if (v <= UINT32_MAX) {
		if (v == 0 || (v >= SHMTRACE_CAPACITY_MIN && v <= SHMTRACE_CAPACITY_MAX && !(v & (v - 1)))) {
			*cap = (uint32_t)v;
			return 0;
		}
		PyErr_Format(PyExc_ValueError, "capacity must be 0 (262144) or a power of two from %u "
			     "to %u, not %R", SHMTRACE_CAPACITY_MIN, SHMTRACE_CAPACITY_MAX, o);
		return -1;
	}
	PyErr_Format(PyExc_OverflowError, "capacity must be 0 (262144) or a power of two from %u "
		     "to %u, not %R", SHMTRACE_CAPACITY_MIN, SHMTRACE_CAPACITY_MAX, o);
	return -1;
}

static PyObject *mod_create_ring(PyObject *m, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "ring", "capacity", "mode", NULL };
	struct shmtrace_ring_config cfg = { 0 };
	const char *ring, *mode = "discard";
	PyObject *capobj = NULL;
	uint32_t cap;
	int ret;

	(void)m;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "s|Os:create_ring", kwlist, &ring, &capobj, &mode))
		return NULL;
	if (capacity_of(capobj, &cap) < 0)
		return NULL;
	if (!strcmp(mode, "overwrite"))
		cfg.mode = SHMTRACE_MODE_OVERWRITE;
	else if (strcmp(mode, "discard")) {
		PyErr_Format(PyExc_ValueError, "mode must be \"discard\" or \"overwrite\", not \"%s\"", mode);
		return NULL;
	}
	cfg.capacity = cap;
	Py_BEGIN_ALLOW_THREADS
	ret = shmtrace_ring_create(ring, &cfg);
	Py_END_ALLOW_THREADS
	if (ret < 0) {
		/* ring may have come by keyword: args is no place to find it */
		PyObject *name = PyUnicode_DecodeFSDefault(ring), *r;

		r = pyst_raise(ret, name);
		Py_XDECREF(name);
		return r;
	}
	Py_RETURN_NONE;
}

PyDoc_STRVAR(unlink_ring_doc,
"unlink_ring(ring) -> None\n"
"--\n\n"
"Removes the ring's name from /dev/shm; processes attached to it keep\n"
"recording into their mapping. Raises shmtrace.Error (ENOENT...).");

static PyObject *mod_unlink_ring(PyObject *m, PyObject *arg)
{
	const char *ring;
	Py_ssize_t len;
	int ret;

	(void)m;
	ring = pyst_utf8_of(arg, "ring", &len);
	if (!ring)
		return NULL;
	ret = shmtrace_ring_unlink(ring);
	if (ret < 0)
		return pyst_raise(ret, arg);
	Py_RETURN_NONE;
}

PyDoc_STRVAR(get_default_doc,
"get_default() -> Tracer\n"
"--\n\n"
"The tracer the module-level functions use: at import, the ring named by\n"
"SHMTRACE_RING (off when unset, or when it cannot be opened: the library\n"
"then says why on stderr once; when that ring does not exist yet, off\n"
"until it appears, then on), or what set_default() installed.");

static PyObject *mod_get_default(PyObject *m, PyObject *Py_UNUSED(i))
{
	Tracer *tr = pyst_dflt();

	(void)m;
	Py_INCREF(tr);
	return (PyObject *)tr;
}

PyDoc_STRVAR(set_default_doc,
"set_default(tracer) -> None\n"
"--\n\n"
"Makes tracer (from open(), or None for off) the one the module-level\n"
"functions use, in this process and in children it forks.");

static PyObject *mod_set_default(PyObject *m, PyObject *arg)
{
	Tracer *old = pyst_default_tracer;

	(void)m;
	if (arg == Py_None) {
		arg = (PyObject *)pyst_tracer_new(NULL, 0, NULL);
		if (!arg)
			return NULL;
	} else if (Py_TYPE(arg) != &pyst_tracer_type) {
		PyErr_Format(PyExc_TypeError, "set_default() needs a Tracer or None, not %.100s",
			     Py_TYPE(arg)->tp_name);
		return NULL;
	} else {
		Py_INCREF(arg);
	}
	pyst_default_tracer = (Tracer *)arg;
	pyst_default_from_env = 0;
	Py_DECREF(old);
	Py_RETURN_NONE;
}

PyDoc_STRVAR(now_doc,
"now() -> int\n"
"--\n\n"
"Nanoseconds on the ring's clock (CLOCK_MONOTONIC, or the TSC calibrated\n"
"to it): the timestamps of every record.");

static PyObject *mod_now(PyObject *m, PyObject *Py_UNUSED(i))
{
	(void)m;
	return PyLong_FromUnsignedLongLong(shmtrace_now());
}

/*
 * The module's functions call the default tracer's, holding a reference
 * to it throughout: user code they run (an argument's __index__ or
 * items(), a thread's name) may call set_default(), which drops the
 * module's own.
 */
#define ON_DEFAULT(call)                                \
	do {                                            \
		Tracer *tr = pyst_dflt();               \
		PyObject *r;                            \
		(void)m;                                \
		Py_INCREF(tr);                          \
		r = (call);                             \
		Py_DECREF(tr);                          \
		return r;                               \
	} while (0)

static PyObject *m_span(PyObject *m, PyObject *const *a, Py_ssize_t n, PyObject *k) { ON_DEFAULT(pyst_span(tr, a, n, k)); }
static PyObject *m_instant(PyObject *m, PyObject *const *a, Py_ssize_t n, PyObject *k) { ON_DEFAULT(pyst_instant(tr, a, n, k)); }
static PyObject *m_counter(PyObject *m, PyObject *const *a, Py_ssize_t n, PyObject *k) { ON_DEFAULT(pyst_counter(tr, a, n, k)); }
static PyObject *m_trigger(PyObject *m, PyObject *o) { ON_DEFAULT(pyst_trigger(tr, o)); }
static PyObject *m_flow_new(PyObject *m, PyObject *Py_UNUSED(i)) { ON_DEFAULT(pyst_flow_new(tr, NULL)); }
static PyObject *m_set_thread_name(PyObject *m, PyObject *o) { ON_DEFAULT(pyst_set_name(tr, o, 0)); }
static PyObject *m_set_process_name(PyObject *m, PyObject *o) { ON_DEFAULT(pyst_set_name(tr, o, 1)); }
static PyObject *m_flush(PyObject *m, PyObject *Py_UNUSED(i)) { ON_DEFAULT(pyst_flush(tr, NULL)); }
static PyObject *m_stats(PyObject *m, PyObject *Py_UNUSED(i)) { ON_DEFAULT(pyst_stats(tr, NULL)); }

/* A module constant of 64 bits, as shmtrace.h has it (a long may hold
 * fewer). */
static int add_u64(PyObject *m, const char *name, unsigned long long v)
{
	PyObject *o = PyLong_FromUnsignedLongLong(v);
	int ret = o ? PyModule_AddObjectRef(m, name, o) : -1;

	Py_XDECREF(o);
	return ret;
}

static PyMethodDef module_methods[] = {
	{ "open", CAST(mod_open), FASTKW, open_doc },
	{ "span", CAST(m_span), FASTKW, pyst_span_doc },
	{ "instant", CAST(m_instant), FASTKW, pyst_instant_doc },
	{ "counter", CAST(m_counter), FASTKW, pyst_counter_doc },
	{ "trigger", CAST(m_trigger), METH_O, pyst_trigger_doc },
	{ "flow_new", CAST(m_flow_new), METH_NOARGS, pyst_flow_new_doc },
	{ "set_thread_name", CAST(m_set_thread_name), METH_O, pyst_set_thread_name_doc },
	{ "set_process_name", CAST(m_set_process_name), METH_O, pyst_set_process_name_doc },
	{ "flush", CAST(m_flush), METH_NOARGS, pyst_flush_doc },
	{ "stats", CAST(m_stats), METH_NOARGS, pyst_stats_doc },
	{ "get_default", CAST(mod_get_default), METH_NOARGS, get_default_doc },
	{ "set_default", CAST(mod_set_default), METH_O, set_default_doc },
	{ "create_ring", CAST(mod_create_ring), METH_VARARGS | METH_KEYWORDS, create_ring_doc },
	{ "unlink_ring", CAST(mod_unlink_ring), METH_O, unlink_ring_doc },
	{ "now", CAST(mod_now), METH_NOARGS, now_doc },
	{ NULL, NULL, 0, NULL }
};

static struct PyModuleDef module_def = {
	PyModuleDef_HEAD_INIT,
	.m_name = "shmtrace._shmtrace",
	.m_doc = "The C half of the shmtrace package; import shmtrace instead.",
	.m_size = -1,
	.m_methods = module_methods,
};

PyMODINIT_FUNC PyInit__shmtrace(void)
{
	const char *env = getenv("SHMTRACE_RING");
	PyObject *m;

	pyst_str_name = PyUnicode_InternFromString("name");
	pyst_str_cat = PyUnicode_InternFromString("cat");
	pyst_str_flow = PyUnicode_InternFromString("flow");
	pyst_str_value = PyUnicode_InternFromString("value");
	pyst_str_args = PyUnicode_InternFromString("args");
	pyst_str_default_cat = PyUnicode_InternFromString(DEFAULT_CAT);
	if (!pyst_str_name || !pyst_str_cat || !pyst_str_flow || !pyst_str_value || !pyst_str_args ||
	    !pyst_str_default_cat)
		return NULL;
	/* current_flow(): in a ContextVar, so that it follows asyncio tasks,
	 * await and copy_context(); the package's flow() sets it */
	if (!pyst_flow_var) {
		PyObject *zero = PyLong_FromLong(0);

		pyst_flow_var = zero ? PyContextVar_New("shmtrace_flow", zero) : NULL;
		Py_XDECREF(zero);
		if (!pyst_flow_var)
			return NULL;
	}
	if (PyType_Ready(&pyst_span_type) < 0 || pyst_span_type_finish() < 0 ||
	    PyType_Ready(&pyst_tracer_type) < 0)
		return NULL;
	if (!pyst_stats_type.tp_name && PyStructSequence_InitType2(&pyst_stats_type, &pyst_stats_desc) < 0)
		return NULL;
	m = PyModule_Create(&module_def);
	if (!m)
		return NULL;
	pyst_error = PyErr_NewExceptionWithDoc("shmtrace.Error",
		"An error of libshmtrace: an OSError whose errno is the library's\n"
		"-errno and whose strerror is shmtrace_strerror()'s message.",
		PyExc_OSError, NULL);
	pyst_null_span = pyst_span_alloc();
	if (pyst_null_span) {
		pyst_null_span->tr = NULL;
		pyst_null_span->flow = 0;
		pyst_null_span->active = 0;
	}
	/* the library attached its default handle to $SHMTRACE_RING when this
	 * module was loaded (and said on stderr why not, if it could not) */
	pyst_default_tracer = pyst_tracer_new(shmtrace_default, 0, NULL);
	pyst_default_from_env = env && *env;
	if (pyst_default_tracer && shmtrace_default) {
		Py_DECREF(pyst_default_tracer->ring);
		pyst_default_tracer->ring = env ? PyUnicode_DecodeFSDefault(env) : Py_None;
		if (!env)
			Py_INCREF(Py_None);
	}
	if (!pyst_error || !pyst_null_span || !pyst_default_tracer || !pyst_default_tracer->ring ||
	    PyModule_AddObjectRef(m, "Error", pyst_error) < 0 ||
	    PyModule_AddObjectRef(m, "Span", (PyObject *)&pyst_span_type) < 0 ||
	    PyModule_AddObjectRef(m, "Tracer", (PyObject *)&pyst_tracer_type) < 0 ||
	    PyModule_AddObjectRef(m, "Stats", (PyObject *)&pyst_stats_type) < 0 ||
	    PyModule_AddObjectRef(m, "flow_var", pyst_flow_var) < 0 ||
	    /* the flow roles (shmtrace.h), which the package's flow_recv() and
	     * flow_end() put on an id */
	    add_u64(m, "FLOW_RECEIVES", SHMTRACE_FLOW_RECEIVES) < 0 ||
	    add_u64(m, "FLOW_TERMINATES", SHMTRACE_FLOW_TERMINATES) < 0 ||
	    add_u64(m, "FLOW_ID_MASK", SHMTRACE_FLOW_ID_MASK) < 0 ||
	    PyModule_AddStringConstant(m, "DEFAULT_CATEGORY", DEFAULT_CAT) < 0 ||
	    PyModule_AddStringConstant(m, "LIBRARY_VERSION", SHMTRACE_VERSION_STRING) < 0) {
		Py_DECREF(m);
		return NULL;
	}
	/* before the library closes the default handle at exit (tracer.c) */
	pyst_unlocked_setup();
	Py_AtExit(pyst_unlocked_at_exit);
	return m;
}
