/* SPDX-License-Identifier: MIT */
/*
 * _shmtrace.c - the CPython binding of libshmtrace: tracers, the Span
 * context manager and the module-level calls on the default tracer.
 *
 * Everything on the hot path is C: `with shmtrace.span("x", cat="rpc")`
 * costs one vectorcall with hand-parsed arguments, two dict lookups (names
 * are interned once per tracer and cached in a dict keyed by the str), one
 * small object, two clock reads and one shmtrace_span(). The GIL is held
 * across every call that uses a handle, so close() can never free a handle
 * another thread is inside. Records the ring cannot take are dropped and
 * counted by the library (stats().dropped), never raised: tracing must not
 * change the control flow of the traced program.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "shmtrace.h"

#define MAX_STRING	1024	/* libshmtrace cuts interned strings here */
#define MAX_NAME	31	/* and thread/process names here */
#define CACHE_MAX	65536	/* more distinct names than a ring can hold */
#define DEFAULT_CAT	"python"
#define PAIR_SLOTS	64	/* (name, cat) pairs cached by identity; a power of 2 */
#define SPAN_FREE	16	/* Span objects kept for reuse */

/* The ids of one (name, cat) pair of str objects, found by identity: the
 * literals of a `with span("x", cat="y")` are the same objects every time,
 * so a hit costs two pointer compares instead of two dict lookups. Holds a
 * reference to both keys, so an address cannot be reused while cached. */
struct pair {
	PyObject *name, *cat;
	uint32_t name_id, cat_id;
};

typedef struct {
	PyObject_HEAD
	shmtrace_t *t;		/* NULL: tracing off, every call a no-op */
	int owned;		/* 1: ours to close; 0: the library's default */
	PyObject *ring;		/* str, or None */
	PyObject *cache;	/* dict: exact str -> int id */
	struct pair pairs[PAIR_SLOTS];
} Tracer;

typedef struct {
	PyObject_HEAD
	vectorcallfunc vectorcall;	/* span_call: __enter__ and __exit__ */
	Tracer *tr;		/* NULL for the shared no-op span */
	uint64_t start;
	uint64_t flow;
	uint32_t cat, name;
	int active;
} Span;

static PyTypeObject TracerType;
static PyTypeObject SpanType;
static PyTypeObject StatsType;
static PyObject *Error;
static Tracer *default_tracer;
static Span *null_span;
static PyObject *threading_mod;
static PyObject *str_name, *str_cat, *str_flow, *str_value, *str_default_cat;

/* 1 once this thread's name is in the ring (the library keeps it for the
 * rings the thread writes to later, and across fork) */
static __thread int tls_named;

/* ------------------------------------------------------------ helpers */

static PyObject *raise_err(int ret, PyObject *filename)
{
	PyObject *e;

	if (filename)
		e = PyObject_CallFunction(Error, "isO", -ret, shmtrace_strerror(ret), filename);
	else
		e = PyObject_CallFunction(Error, "is", -ret, shmtrace_strerror(ret));
	if (e) {
		PyErr_SetObject(Error, e);
		Py_DECREF(e);
	}
	return NULL;
}

/* UTF-8 of a str with no NUL in it; NULL with an exception set. */
static const char *utf8_of(PyObject *s, const char *what, Py_ssize_t *len)
{
	const char *u;

	if (!PyUnicode_Check(s)) {
		PyErr_Format(PyExc_TypeError, "%s must be str, not %.100s", what, Py_TYPE(s)->tp_name);
		return NULL;
	}
	u = PyUnicode_AsUTF8AndSize(s, len);
	if (!u)
		return NULL;	/* lone surrogates: UnicodeEncodeError */
	if ((Py_ssize_t)strlen(u) != *len) {
		PyErr_Format(PyExc_ValueError, "%s must not contain a null character", what);
		return NULL;
	}
	return u;
}

/* Copies at most max bytes of u into buf, never cutting a UTF-8 sequence:
 * the library cuts by bytes, which could leave half a character. */
static void copy_cut(char *buf, const char *u, Py_ssize_t len, Py_ssize_t max)
{
	if (len > max) {
		len = max;
		/* back off over continuation bytes to the start of a character */
		while (len > 0 && ((unsigned char)u[len] & 0xc0) == 0x80)
			len--;
	}
	memcpy(buf, u, (size_t)len);
	buf[len] = 0;
}

/* The id of s in tr's ring, cached per tracer. Returns 0 with an exception
 * set on a bad argument; an id of 0 from a full string table is a valid
 * result (exported as "?"), hence the separate *ok. */
static uint32_t intern(Tracer *tr, PyObject *s, const char *what, int *ok)
{
	char buf[MAX_STRING + 1];
	const char *u;
	Py_ssize_t len;
	PyObject *v;
	uint32_t id;

	*ok = 0;
	if (PyUnicode_CheckExact(s)) {
		v = PyDict_GetItemWithError(tr->cache, s);
		if (v) {
			*ok = 1;
			return (uint32_t)PyLong_AsUnsignedLong(v);
		}
		if (PyErr_Occurred())
			return 0;
	}
	u = utf8_of(s, what, &len);
	if (!u)
		return 0;
	copy_cut(buf, u, len, MAX_STRING);
	id = shmtrace_intern(tr->t, buf);
	/* only exact str keys: a subclass could hash differently, or hold
	 * a reference back to the tracer */
	if (PyUnicode_CheckExact(s) && PyDict_GET_SIZE(tr->cache) < CACHE_MAX) {
		v = PyLong_FromUnsignedLong(id);
		if (!v || PyDict_SetItem(tr->cache, s, v) < 0) {
			Py_XDECREF(v);
			return 0;
		}
		Py_DECREF(v);
	}
	*ok = 1;
	return id;
}

/* Names the calling thread after threading.current_thread().name, once.
 * Any failure (interpreter shutting down) leaves the kernel's name. */
static void name_thread(Tracer *tr)
{
	PyObject *exc_type, *exc_val, *exc_tb, *th, *name;
	char buf[MAX_NAME + 1];
	const char *u;
	Py_ssize_t len;

	tls_named = 1;
	PyErr_Fetch(&exc_type, &exc_val, &exc_tb);
	if (!threading_mod)
		threading_mod = PyImport_ImportModule("threading");
	th = threading_mod ? PyObject_CallMethod(threading_mod, "current_thread", NULL) : NULL;
	name = th ? PyObject_GetAttrString(th, "name") : NULL;
	if (name && PyUnicode_Check(name) && (u = PyUnicode_AsUTF8AndSize(name, &len))) {
		copy_cut(buf, u, len, MAX_NAME);
		shmtrace_set_thread_name(tr->t, buf);
	}
	Py_XDECREF(name);
	Py_XDECREF(th);
	PyErr_Clear();
	PyErr_Restore(exc_type, exc_val, exc_tb);
}

static inline int enabled(Tracer *tr)
{
	if (!tr->t)
		return 0;
	if (!tls_named)
		name_thread(tr);
	return 1;
}

/* Parses (name, cat=None, flow=0) or (name, value, cat=None) by hand: the
 * generic argument parser would cost more than the record itself. keys
 * lists the parameter names; out receives borrowed references. */
static int parse_args(const char *fn, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
		      PyObject **keys, int nkeys, int nrequired, PyObject **out)
{
	Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;

	if (nargs > nkeys) {
		PyErr_Format(PyExc_TypeError, "%s() takes at most %d arguments (%zd given)",
			     fn, nkeys, nargs + nkw);
		return -1;
	}
	for (int i = 0; i < nkeys; i++)
		out[i] = i < nargs ? args[i] : NULL;
	for (Py_ssize_t k = 0; k < nkw; k++) {
		PyObject *kw = PyTuple_GET_ITEM(kwnames, k);
		int i;

		for (i = 0; i < nkeys; i++)
			if (kw == keys[i])
				break;
		if (i == nkeys) {
			/* not interned: compare the text */
			for (i = 0; i < nkeys; i++)
				if (PyUnicode_Compare(kw, keys[i]) == 0)
					break;
			if (PyErr_Occurred())
				return -1;
		}
		if (i == nkeys) {
			PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%S'",
				     fn, kw);
			return -1;
		}
		if (out[i]) {
			PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%S'",
				     fn, kw);
			return -1;
		}
		out[i] = args[nargs + k];
	}
	for (int i = 0; i < nrequired; i++) {
		if (!out[i]) {
			PyErr_Format(PyExc_TypeError, "%s() missing required argument '%S'", fn, keys[i]);
			return -1;
		}
	}
	return 0;
}

static int check_str(PyObject *o, const char *what, int none_ok)
{
	if (PyUnicode_Check(o) || (none_ok && o == Py_None))
		return 0;
	PyErr_Format(PyExc_TypeError, "%s must be str%s, not %.100s", what,
		     none_ok ? " or None" : "", Py_TYPE(o)->tp_name);
	return -1;
}

/* The name (str) and cat (str or None, or absent: NULL) of a record. */
static int check_name_cat(PyObject *name, PyObject *cat)
{
	if (check_str(name, "name", 0) < 0 || (cat && check_str(cat, "cat", 1) < 0))
		return -1;
	return 0;
}

/* Interns a record's name and cat (checked by check_name_cat(); no cat:
 * DEFAULT_CAT). Returns 0, or -1 with a Python error set. */
static int intern_name_cat(Tracer *tr, PyObject *name, PyObject *cat, uint32_t *name_id,
			   uint32_t *cat_id)
{
	struct pair *p;
	int ok;

	if (!cat || cat == Py_None)
		cat = str_default_cat;
	p = &tr->pairs[(((uintptr_t)name >> 4) ^ ((uintptr_t)cat >> 6)) & (PAIR_SLOTS - 1)];
	if (p->name == name && p->cat == cat) {
		*name_id = p->name_id;
		*cat_id = p->cat_id;
		return 0;
	}
	*name_id = intern(tr, name, "name", &ok);
	if (!ok)
		return -1;
	*cat_id = intern(tr, cat, "cat", &ok);
	if (!ok)
		return -1;
	/* exact str only: a subclass instance could refer back to the tracer */
	if (PyUnicode_CheckExact(name) && PyUnicode_CheckExact(cat)) {
		PyObject *old_name = p->name, *old_cat = p->cat;

		Py_INCREF(name);
		Py_INCREF(cat);
		p->name = name;
		p->cat = cat;
		p->name_id = *name_id;
		p->cat_id = *cat_id;
		Py_XDECREF(old_name);
		Py_XDECREF(old_cat);
	}
	return 0;
}

static void pairs_clear(Tracer *tr)
{
	for (int i = 0; i < PAIR_SLOTS; i++) {
		Py_CLEAR(tr->pairs[i].name);
		Py_CLEAR(tr->pairs[i].cat);
	}
}

/* A flow id: None or an int in 0..2^64-1. */
static int get_flow(PyObject *o, uint64_t *flow)
{
	if (!o || o == Py_None) {
		*flow = 0;
		return 0;
	}
	if (!PyLong_Check(o)) {
		PyErr_Format(PyExc_TypeError, "flow must be int or None, not %.100s",
			     Py_TYPE(o)->tp_name);
		return -1;
	}
	*flow = PyLong_AsUnsignedLongLong(o);
	if (*flow == (uint64_t)-1 && PyErr_Occurred()) {
		if (PyErr_ExceptionMatches(PyExc_OverflowError) || PyErr_ExceptionMatches(PyExc_ValueError)) {
			PyErr_Clear();
			PyErr_SetString(PyExc_OverflowError, "flow must be in 0..2**64-1");
		}
		return -1;
	}
	return 0;
}

/* 1 while the module-level functions use the library's default handle
 * (SHMTRACE_RING), which may attach after import: the ring can appear
 * later (the library's own thread looks for it every 100 ms) */
static int default_from_env;

/* The tracer of the module-level functions (always set after init). */
static Tracer *dflt(void)
{
	if (default_from_env && !default_tracer->t) {
		/* pairs with the release store in the library's watcher */
		shmtrace_t *t = __atomic_load_n(&shmtrace_default, __ATOMIC_ACQUIRE);

		if (t) {
			const char *env = getenv("SHMTRACE_RING");
			PyObject *ring = env ? PyUnicode_DecodeFSDefault(env) : NULL;

			default_tracer->t = t;
			if (ring) {
				Py_DECREF(default_tracer->ring);
				default_tracer->ring = ring;
			} else {
				PyErr_Clear();
			}
		}
	}
	return default_tracer;
}

/* ------------------------------------------------------------ Span */

PyDoc_STRVAR(span_doc,
"A span being timed: what span() returns, a context manager.\n\n"
"__enter__ reads the clock, __exit__ reads it again and records the\n"
"span [enter, exit) with its category, name and flow id; an exception\n"
"leaving the block is not swallowed. A Span may be entered again after it\n"
"has exited (each time records one span), but not while it is active.\n\n"
"s.__enter__ and s.__exit__ are s itself: calling a Span with no argument\n"
"enters it, with the three arguments of __exit__ exits it. This spares the\n"
"interpreter a bound-method object for each of the two calls of a `with`.");

/* Spans kept for reuse (under the GIL): a `with span()` allocates nothing */
static Span *span_free[SPAN_FREE];
static int span_nfree;

static PyObject *span_call(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames);

static Span *span_alloc(void)
{
	Span *s;

	if (span_nfree > 0) {
		s = span_free[--span_nfree];
		(void)PyObject_Init((PyObject *)s, &SpanType);
	} else {
		s = PyObject_New(Span, &SpanType);
		if (!s)
			return NULL;
	}
	s->vectorcall = span_call;
	return s;
}

static void span_dealloc(Span *s)
{
	Py_CLEAR(s->tr);
	if (span_nfree < SPAN_FREE)
		span_free[span_nfree++] = s;
	else
		PyObject_Free(s);
}

static PyObject *span_enter(Span *s)
{
	if (s->tr) {
		if (s->active) {
			PyErr_SetString(PyExc_RuntimeError, "this span is already active");
			return NULL;
		}
		s->active = 1;
		s->start = shmtrace_now();
	}
	Py_INCREF(s);
	return (PyObject *)s;
}

static PyObject *span_exit(Span *s)
{
	if (s->tr && s->active) {
		uint64_t end = shmtrace_now();

		s->active = 0;
		/* closed meanwhile: its ids mean nothing any more */
		if (s->tr->t)
			shmtrace_span(s->tr->t, s->cat, s->name, s->start, end, s->flow);
	}
	Py_RETURN_NONE;
}

/* What the interpreter calls for __enter__ (no argument) and __exit__
 * (type, value, traceback), both found as the span itself by span_self(). */
static PyObject *span_call(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
	Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);

	(void)args;
	if (!kwnames || PyTuple_GET_SIZE(kwnames) == 0) {
		if (nargs == 0)
			return span_enter((Span *)self);
		if (nargs == 3)
			return span_exit((Span *)self);
	}
	PyErr_Format(PyExc_TypeError,
		     "a Span is called as __enter__() or __exit__(exc_type, exc, tb), not with %zd arguments",
		     nargs + (kwnames ? PyTuple_GET_SIZE(kwnames) : 0));
	return NULL;
}

/* __enter__ and __exit__: the span itself, which span_call() dispatches */
static PyObject *span_self(PyObject *s, void *Py_UNUSED(c))
{
	Py_INCREF(s);
	return s;
}

static PyObject *span_get_flow(Span *s, void *Py_UNUSED(c))
{
	return PyLong_FromUnsignedLongLong(s->flow);
}

static PyObject *span_get_enabled(Span *s, void *Py_UNUSED(c))
{
	return PyBool_FromLong(s->tr != NULL);
}

static PyGetSetDef span_getset[] = {
	{ "__enter__", span_self, NULL,
	  "__enter__() starts the span: reads the clock. (The span itself, called.)", NULL },
	{ "__exit__", span_self, NULL,
	  "__exit__(exc_type, exc, tb) ends the span: reads the clock and records it. Never\n"
	  "swallows an exception. (The span itself, called.)", NULL },
	{ "flow", (getter)span_get_flow, NULL, "The flow id the span carries (0: none).", NULL },
	{ "enabled", (getter)span_get_enabled, NULL,
	  "False for the no-op span of a tracer that is off.", NULL },
	{ NULL, NULL, NULL, NULL, NULL }
};

static PyTypeObject SpanType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "shmtrace.Span",
	.tp_basicsize = sizeof(Span),
	.tp_dealloc = (destructor)span_dealloc,
	.tp_vectorcall_offset = offsetof(Span, vectorcall),
	.tp_call = PyVectorcall_Call,
	.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
	.tp_doc = span_doc,
	.tp_getset = span_getset,
};

/* ------------------------------------------------------------ Tracer */

PyDoc_STRVAR(span_fn_doc,
"span(name, cat=None, flow=None) -> Span\n"
"--\n\n"
"A context manager that records one span around its block.\n\n"
"    with shmtrace.span(\"handle\", cat=\"rpc\", flow=fid):\n"
"        handle(request)\n\n"
"name: the span's name (str). cat: its category (str; None: \"python\").\n"
"flow: a flow id from flow_new(), usually received from another process\n"
"with the request, that links the spans of one request across threads and\n"
"processes into one arrow in the viewers (None or 0: none). Chrome DevTools\n"
"joins a flow only within one category: give every span of a flow, in C\n"
"and in Python, the same cat.\n\n"
"The span starts when the block is entered and ends when it is left,\n"
"also by an exception (which is not swallowed). Names are interned once\n"
"per process and cached: repeating a name costs a dict lookup. Strings\n"
"longer than 1024 bytes of UTF-8 are cut at a character boundary.\n\n"
"Raises TypeError for arguments of the wrong type, UnicodeEncodeError for\n"
"a str that is not valid Unicode (lone surrogates), ValueError for one\n"
"with a null character, OverflowError for a flow outside 0..2**64-1.\n"
"With tracing off (no ring) it returns a shared no-op Span after checking\n"
"the argument types. A record the ring cannot take is dropped and counted\n"
"(stats().dropped), never raised.");

static PyObject *do_span(Tracer *tr, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
	PyObject *keys[3] = { str_name, str_cat, str_flow }, *a[3];
	uint32_t cat, name;
	uint64_t flow;
	Span *s;

	if (parse_args("span", args, nargs, kwnames, keys, 3, 1, a) < 0)
		return NULL;
	if (check_name_cat(a[0], a[1]) < 0 || get_flow(a[2], &flow) < 0)
		return NULL;
	if (!enabled(tr)) {
		Py_INCREF(null_span);
		return (PyObject *)null_span;
	}
	if (intern_name_cat(tr, a[0], a[1], &name, &cat) < 0)
		return NULL;
	s = span_alloc();
	if (!s)
		return NULL;
	Py_INCREF(tr);
	s->tr = tr;
	s->cat = cat;
	s->name = name;
	s->flow = flow;
	s->start = 0;
	s->active = 0;
	return (PyObject *)s;
}

PyDoc_STRVAR(instant_doc,
"instant(name, cat=None, flow=None) -> None\n"
"--\n\n"
"Records an instant event now: a point in time, with an optional flow id\n"
"(an \"error\" or \"retry\" of one request). Arguments as for span().");

static PyObject *do_instant(Tracer *tr, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
	PyObject *keys[3] = { str_name, str_cat, str_flow }, *a[3];
	uint32_t cat, name;
	uint64_t flow;

	if (parse_args("instant", args, nargs, kwnames, keys, 3, 1, a) < 0)
		return NULL;
	if (check_name_cat(a[0], a[1]) < 0 || get_flow(a[2], &flow) < 0)
		return NULL;
	if (!enabled(tr))
		Py_RETURN_NONE;
	if (intern_name_cat(tr, a[0], a[1], &name, &cat) < 0)
		return NULL;
	shmtrace_instant(tr->t, cat, name, flow);
	Py_RETURN_NONE;
}

PyDoc_STRVAR(counter_doc,
"counter(name, value, cat=None) -> None\n"
"--\n\n"
"Records the value of counter name now (an int in -2**63..2**63-1, or any\n"
"object with __index__); viewers draw it as a graph per process. Raises\n"
"TypeError for a value that is not an integer, OverflowError out of range.");

static PyObject *do_counter(Tracer *tr, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
	PyObject *keys[3] = { str_name, str_value, str_cat }, *a[3];
	uint32_t cat, name;
	long long value;

	if (parse_args("counter", args, nargs, kwnames, keys, 3, 2, a) < 0)
		return NULL;
	if (check_name_cat(a[0], a[2]) < 0)
		return NULL;
	if (PyFloat_Check(a[1]) || !PyIndex_Check(a[1])) {
		PyErr_Format(PyExc_TypeError, "value must be int, not %.100s", Py_TYPE(a[1])->tp_name);
		return NULL;
	}
	value = PyLong_AsLongLong(a[1]);
	if (value == -1 && PyErr_Occurred())
		return NULL;
	if (!enabled(tr))
		Py_RETURN_NONE;
	if (intern_name_cat(tr, a[0], a[2], &name, &cat) < 0)
		return NULL;
	shmtrace_counter(tr->t, cat, name, value);
	Py_RETURN_NONE;
}

PyDoc_STRVAR(flow_new_doc,
"flow_new() -> int\n"
"--\n\n"
"Returns a new flow id, unique among all processes of the ring, never 0\n"
"and below 2**53 (exact in JavaScript viewers). Send it along with a\n"
"request and pass it as flow= to the span of each hop. 0 when tracing is off.");

static PyObject *do_flow_new(Tracer *tr)
{
	return PyLong_FromUnsignedLongLong(tr->t ? shmtrace_flow_new(tr->t) : 0);
}

static PyObject *set_name(Tracer *tr, PyObject *arg, int process)
{
	char buf[MAX_NAME + 1];
	const char *u;
	Py_ssize_t len;
	int ret;

	u = utf8_of(arg, "name", &len);
	if (!u)
		return NULL;
	if (!tr->t)
		Py_RETURN_NONE;
	copy_cut(buf, u, len, MAX_NAME);
	if (process) {
		/* a name slot holds both names, and the last one wins: the
		 * thread's own name goes in first */
		if (!tls_named)
			name_thread(tr);
		ret = shmtrace_set_process_name(tr->t, buf);
	} else {
		tls_named = 1;	/* the caller's name wins over threading's */
		ret = shmtrace_set_thread_name(tr->t, buf);
	}
	if (ret < 0)
		return raise_err(ret, NULL);
	Py_RETURN_NONE;
}

PyDoc_STRVAR(set_thread_name_doc,
"set_thread_name(name) -> None\n"
"--\n\n"
"Names the calling thread in the trace (at most 31 bytes of UTF-8, cut at\n"
"a character boundary). Without it a thread is named after\n"
"threading.current_thread().name when it first records. Raises\n"
"shmtrace.Error when the ring's name table is full.");

static PyObject *do_set_thread_name(Tracer *tr, PyObject *arg)
{
	return set_name(tr, arg, 0);
}

PyDoc_STRVAR(set_process_name_doc,
"set_process_name(name) -> None\n"
"--\n\n"
"Names the calling process in the trace (at most 31 bytes of UTF-8).\n"
"Without it the kernel's name (comm, e.g. \"python3\") is shown.");

static PyObject *do_set_process_name(Tracer *tr, PyObject *arg)
{
	return set_name(tr, arg, 1);
}

PyDoc_STRVAR(flush_doc,
"flush() -> None\n"
"--\n\n"
"Moves the calling thread's staged records into the ring now. Never needed\n"
"for durability (a record survives its process as soon as the call that\n"
"wrote it returns); it makes records visible to the collector sooner.\n"
"Raises shmtrace.Error (ETIMEDOUT) when the ring lock is wedged.");

static PyObject *do_flush(Tracer *tr)
{
	int ret;

	if (!tr->t)
		Py_RETURN_NONE;
	ret = shmtrace_flush(tr->t);
	if (ret < 0)
		return raise_err(ret, NULL);
	Py_RETURN_NONE;
}

PyDoc_STRVAR(stats_doc,
"stats() -> Stats | None\n"
"--\n\n"
"The ring's counters: capacity, head (records ever published), tail\n"
"(records the collector consumed), dropped, overwritten, lock_timeouts,\n"
"mode (\"discard\" or \"overwrite\") and strings (interned). None when\n"
"tracing is off.");

static PyObject *do_stats(Tracer *tr)
{
	struct shmtrace_stats st;
	PyObject *r;
	int ret;

	if (!tr->t)
		Py_RETURN_NONE;
	ret = shmtrace_stats(tr->t, &st);
	if (ret < 0)
		return raise_err(ret, NULL);
	r = PyStructSequence_New(&StatsType);
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

static void tracer_detach(Tracer *tr)
{
	shmtrace_t *t = tr->t;

	tr->t = NULL;
	if (!t)
		return;
	if (tr->owned)
		shmtrace_close(t);
	else if (t == shmtrace_default)
		shmtrace_default_open(NULL);	/* closes it */
}

PyDoc_STRVAR(close_doc,
"close() -> None\n"
"--\n\n"
"Flushes this process's staged records into the ring and detaches; the\n"
"tracer is off from then on (its calls are no-ops). Also what leaving a\n"
"`with shmtrace.open(...) as t:` block does. Closing twice is harmless.");

static PyObject *tracer_close(Tracer *tr, PyObject *Py_UNUSED(ignored))
{
	tracer_detach(tr);
	Py_RETURN_NONE;
}

static void tracer_dealloc(Tracer *tr)
{
	/* the default handle outlives its wrapper: the library closes it at exit */
	if (tr->owned)
		tracer_detach(tr);
	Py_XDECREF(tr->ring);
	Py_XDECREF(tr->cache);
	pairs_clear(tr);
	Py_TYPE(tr)->tp_free((PyObject *)tr);
}

static Tracer *tracer_new(shmtrace_t *t, int owned, PyObject *ring)
{
	Tracer *tr = PyObject_New(Tracer, &TracerType);

	if (!tr)
		return NULL;
	tr->t = t;
	tr->owned = owned;
	memset(tr->pairs, 0, sizeof(tr->pairs));
	tr->ring = ring ? ring : Py_None;
	Py_INCREF(tr->ring);
	tr->cache = PyDict_New();
	if (!tr->cache) {
		tr->owned = 0;
		tr->t = NULL;
		Py_DECREF(tr);
		return NULL;
	}
	return tr;
}

static PyObject *tracer_enter(Tracer *tr, PyObject *Py_UNUSED(ignored))
{
	Py_INCREF(tr);
	return (PyObject *)tr;
}

static PyObject *tracer_exit(Tracer *tr, PyObject *const *args, Py_ssize_t nargs)
{
	(void)args;
	(void)nargs;
	tracer_detach(tr);
	Py_RETURN_NONE;
}

static PyObject *tracer_repr(Tracer *tr)
{
	return PyUnicode_FromFormat("<shmtrace.Tracer ring=%R %s>", tr->ring,
				    tr->t ? "on" : "off");
}

/* Tracer methods: the same code as the module functions, on self */
static PyObject *t_span(Tracer *tr, PyObject *const *a, Py_ssize_t n, PyObject *k) { return do_span(tr, a, n, k); }
static PyObject *t_instant(Tracer *tr, PyObject *const *a, Py_ssize_t n, PyObject *k) { return do_instant(tr, a, n, k); }
static PyObject *t_counter(Tracer *tr, PyObject *const *a, Py_ssize_t n, PyObject *k) { return do_counter(tr, a, n, k); }
static PyObject *t_flow_new(Tracer *tr, PyObject *Py_UNUSED(i)) { return do_flow_new(tr); }
static PyObject *t_flush(Tracer *tr, PyObject *Py_UNUSED(i)) { return do_flush(tr); }
static PyObject *t_stats(Tracer *tr, PyObject *Py_UNUSED(i)) { return do_stats(tr); }

#define FASTKW (METH_FASTCALL | METH_KEYWORDS)
#define CAST(f) ((PyCFunction)(void (*)(void))(f))

static PyMethodDef tracer_methods[] = {
	{ "span", CAST(t_span), FASTKW, span_fn_doc },
	{ "instant", CAST(t_instant), FASTKW, instant_doc },
	{ "counter", CAST(t_counter), FASTKW, counter_doc },
	{ "flow_new", CAST(t_flow_new), METH_NOARGS, flow_new_doc },
	{ "set_thread_name", CAST(do_set_thread_name), METH_O, set_thread_name_doc },
	{ "set_process_name", CAST(do_set_process_name), METH_O, set_process_name_doc },
	{ "flush", CAST(t_flush), METH_NOARGS, flush_doc },
	{ "stats", CAST(t_stats), METH_NOARGS, stats_doc },
	{ "close", CAST(tracer_close), METH_NOARGS, close_doc },
	{ "__enter__", CAST(tracer_enter), METH_NOARGS, "Returns the tracer." },
	{ "__exit__", CAST(tracer_exit), METH_FASTCALL, "Closes the tracer." },
	{ NULL, NULL, 0, NULL }
};

static PyObject *tracer_get_enabled(Tracer *tr, void *Py_UNUSED(c))
{
	return PyBool_FromLong(tr->t != NULL);
}

static PyGetSetDef tracer_getset[] = {
	{ "enabled", (getter)tracer_get_enabled, NULL,
	  "True while attached to a ring; False when off (every call a no-op).", NULL },
	{ NULL, NULL, NULL, NULL, NULL }
};

static PyMemberDef tracer_members[] = {
	{ "ring", T_OBJECT, offsetof(Tracer, ring), READONLY, "The ring's name, or None." },
	{ NULL, 0, 0, 0, NULL }
};

PyDoc_STRVAR(tracer_doc,
"A handle on one ring, from shmtrace.open(); its methods are those of\n"
"the module (span, instant, counter, flow_new, set_thread_name,\n"
"set_process_name, flush, stats) on this ring. A context manager that\n"
"closes it. It stays valid across fork(): the child records under its\n"
"own pid.");

static PyTypeObject TracerType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "shmtrace.Tracer",
	.tp_basicsize = sizeof(Tracer),
	.tp_dealloc = (destructor)tracer_dealloc,
	.tp_repr = (reprfunc)tracer_repr,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = tracer_doc,
	.tp_methods = tracer_methods,
	.tp_getset = tracer_getset,
	.tp_members = tracer_members,
};

static PyStructSequence_Field stats_fields[] = {
	{ "capacity", "records the ring holds" },
	{ "head", "records ever published into the ring" },
	{ "tail", "records the collector has consumed" },
	{ "dropped", "records discarded because the ring was full or its lock wedged" },
	{ "overwritten", "records overwritten unread (overwrite mode)" },
	{ "lock_timeouts", "flushes given up on a lock held too long" },
	{ "mode", "\"discard\" or \"overwrite\"" },
	{ "strings", "interned strings" },
	{ NULL, NULL }
};

static PyStructSequence_Desc stats_desc = {
	"shmtrace.Stats", "The ring's counters, from stats().", stats_fields, 8
};

/* ------------------------------------------------------------ module */

PyDoc_STRVAR(open_doc,
"open(ring=None) -> Tracer\n"
"--\n\n"
"Attaches to the ring /dev/shm/<ring> (made by shmtrace-collector --create\n"
"or create_ring()) and returns a Tracer. ring=None takes the name from the\n"
"environment variable SHMTRACE_RING; when that is unset or empty the\n"
"tracer is off: every call on it is a cheap no-op.\n\n"
"Raises shmtrace.Error (an OSError) with the library's message: errno\n"
"ENOENT when there is no such ring, EPROTO for a segment that is not a\n"
"ring, EPERM for one owned by another user, EINVAL for a bad name.");

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
	ret = parse_args("open", args, nargs, kwnames, keys, 1, 0, a);
	Py_DECREF(keys[0]);
	if (ret < 0)
		return NULL;
	ringobj = a[0];
	if (!ringobj || ringobj == Py_None) {
		const char *env = getenv("SHMTRACE_RING");

		if (!env || !*env)
			return (PyObject *)tracer_new(NULL, 0, NULL);
		ringobj = PyUnicode_DecodeFSDefault(env);
		if (!ringobj)
			return NULL;
	} else {
		Py_INCREF(ringobj);
	}
	ring = utf8_of(ringobj, "ring", &len);
	if (!ring) {
		Py_DECREF(ringobj);
		return NULL;
	}
	Py_BEGIN_ALLOW_THREADS
	ret = shmtrace_open(ring, &t);
	Py_END_ALLOW_THREADS
	if (ret < 0) {
		raise_err(ret, ringobj);
		Py_DECREF(ringobj);
		return NULL;
	}
	tr = tracer_new(t, 1, ringobj);
	Py_DECREF(ringobj);
	if (!tr)
		shmtrace_close(t);
	return (PyObject *)tr;
}

PyDoc_STRVAR(create_ring_doc,
"create_ring(ring, capacity=0, mode=\"discard\") -> None\n"
"--\n\n"
"Creates the ring /dev/shm/<ring> (usually shmtrace-collector --create\n"
"does): capacity records, a power of two (0: 262144); mode \"discard\"\n"
"drops new records when full, \"overwrite\" keeps the newest. Raises\n"
"shmtrace.Error: EEXIST if it exists, EINVAL for a bad name or capacity.");

static PyObject *mod_create_ring(PyObject *m, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "ring", "capacity", "mode", NULL };
	struct shmtrace_ring_config cfg = { 0 };
	const char *ring, *mode = "discard";
	unsigned int cap = 0;
	int ret;

	(void)m;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "s|Is:create_ring", kwlist, &ring, &cap, &mode))
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
	if (ret < 0)
		return raise_err(ret, PyTuple_GET_ITEM(args, 0));
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
	ring = utf8_of(arg, "ring", &len);
	if (!ring)
		return NULL;
	ret = shmtrace_ring_unlink(ring);
	if (ret < 0)
		return raise_err(ret, arg);
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
	Tracer *tr = dflt();

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
	Tracer *old = default_tracer;

	(void)m;
	if (arg == Py_None) {
		arg = (PyObject *)tracer_new(NULL, 0, NULL);
		if (!arg)
			return NULL;
	} else if (Py_TYPE(arg) != &TracerType) {
		PyErr_Format(PyExc_TypeError, "set_default() needs a Tracer or None, not %.100s",
			     Py_TYPE(arg)->tp_name);
		return NULL;
	} else {
		Py_INCREF(arg);
	}
	default_tracer = (Tracer *)arg;
	default_from_env = 0;
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

static PyObject *m_span(PyObject *m, PyObject *const *a, Py_ssize_t n, PyObject *k) { (void)m; return do_span(dflt(), a, n, k); }
static PyObject *m_instant(PyObject *m, PyObject *const *a, Py_ssize_t n, PyObject *k) { (void)m; return do_instant(dflt(), a, n, k); }
static PyObject *m_counter(PyObject *m, PyObject *const *a, Py_ssize_t n, PyObject *k) { (void)m; return do_counter(dflt(), a, n, k); }
static PyObject *m_flow_new(PyObject *m, PyObject *Py_UNUSED(i)) { (void)m; return do_flow_new(dflt()); }
static PyObject *m_set_thread_name(PyObject *m, PyObject *o) { (void)m; return set_name(dflt(), o, 0); }
static PyObject *m_set_process_name(PyObject *m, PyObject *o) { (void)m; return set_name(dflt(), o, 1); }
static PyObject *m_flush(PyObject *m, PyObject *Py_UNUSED(i)) { (void)m; return do_flush(dflt()); }
static PyObject *m_stats(PyObject *m, PyObject *Py_UNUSED(i)) { (void)m; return do_stats(dflt()); }

static PyMethodDef module_methods[] = {
	{ "open", CAST(mod_open), FASTKW, open_doc },
	{ "span", CAST(m_span), FASTKW, span_fn_doc },
	{ "instant", CAST(m_instant), FASTKW, instant_doc },
	{ "counter", CAST(m_counter), FASTKW, counter_doc },
	{ "flow_new", CAST(m_flow_new), METH_NOARGS, flow_new_doc },
	{ "set_thread_name", CAST(m_set_thread_name), METH_O, set_thread_name_doc },
	{ "set_process_name", CAST(m_set_process_name), METH_O, set_process_name_doc },
	{ "flush", CAST(m_flush), METH_NOARGS, flush_doc },
	{ "stats", CAST(m_stats), METH_NOARGS, stats_doc },
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
	PyObject *m;

	str_name = PyUnicode_InternFromString("name");
	str_cat = PyUnicode_InternFromString("cat");
	str_flow = PyUnicode_InternFromString("flow");
	str_value = PyUnicode_InternFromString("value");
	str_default_cat = PyUnicode_InternFromString(DEFAULT_CAT);
	if (!str_name || !str_cat || !str_flow || !str_value || !str_default_cat)
		return NULL;
	if (PyType_Ready(&SpanType) < 0 || PyType_Ready(&TracerType) < 0)
		return NULL;
	if (!StatsType.tp_name && PyStructSequence_InitType2(&StatsType, &stats_desc) < 0)
		return NULL;
	m = PyModule_Create(&module_def);
	if (!m)
		return NULL;
	Error = PyErr_NewExceptionWithDoc("shmtrace.Error",
		"An error of libshmtrace: an OSError whose errno is the library's\n"
		"-errno and whose strerror is shmtrace_strerror()'s message.",
		PyExc_OSError, NULL);
	null_span = span_alloc();
	if (null_span) {
		null_span->tr = NULL;
		null_span->flow = 0;
		null_span->active = 0;
	}
	/* the library attached its default handle to $SHMTRACE_RING when this
	 * module was loaded (and said on stderr why not, if it could not) */
	default_tracer = tracer_new(shmtrace_default, 0, NULL);
	default_from_env = getenv("SHMTRACE_RING") && *getenv("SHMTRACE_RING");
	if (default_tracer && shmtrace_default) {
		const char *env = getenv("SHMTRACE_RING");

		Py_DECREF(default_tracer->ring);
		default_tracer->ring = env ? PyUnicode_DecodeFSDefault(env) : Py_None;
		if (!env)
			Py_INCREF(Py_None);
	}
	if (!Error || !null_span || !default_tracer || !default_tracer->ring ||
	    PyModule_AddObjectRef(m, "Error", Error) < 0 ||
	    PyModule_AddObjectRef(m, "Span", (PyObject *)&SpanType) < 0 ||
	    PyModule_AddObjectRef(m, "Tracer", (PyObject *)&TracerType) < 0 ||
	    PyModule_AddObjectRef(m, "Stats", (PyObject *)&StatsType) < 0 ||
	    PyModule_AddStringConstant(m, "DEFAULT_CATEGORY", DEFAULT_CAT) < 0 ||
	    PyModule_AddStringConstant(m, "LIBRARY_VERSION", SHMTRACE_VERSION_STRING) < 0) {
		Py_DECREF(m);
		return NULL;
	}
	return m;
}
