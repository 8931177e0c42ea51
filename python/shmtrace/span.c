/* SPDX-License-Identifier: MIT */
/*
 * span.c - the Span context manager: `with shmtrace.span(...)`, the hot path of
 * the binding (see _shmtrace.h for why it allocates nothing).
 */
#include "_shmtrace.h"

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

Span *pyst_span_alloc(void)
{
	Span *s;

	if (span_nfree > 0) {
		s = span_free[--span_nfree];
		(void)PyObject_Init((PyObject *)s, &pyst_span_type);
	} else {
		s = PyObject_New(Span, &pyst_span_type);
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

PyTypeObject pyst_span_type = {
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

PYST_DOC(pyst_span_doc,
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

PyObject *pyst_span(Tracer *tr, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
	PyObject *a[3];
	uint32_t cat, name;
	uint64_t flow;
	Span *s;

	if (pyst_event_args("span", args, nargs, kwnames, a, &flow) < 0)
		return NULL;
	if (!pyst_enabled(tr)) {
		Py_INCREF(pyst_null_span);
		return (PyObject *)pyst_null_span;
	}
	if (pyst_intern_name_cat(tr, a[0], a[1], &name, &cat) < 0)
		return NULL;
	s = pyst_span_alloc();
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
