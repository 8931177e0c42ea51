/* SPDX-License-Identifier: MIT */
/*
 * span.c - the Span context manager: `with shmtrace.span(...)`, the hot path of
 * the binding (see _shmtrace.h for why it allocates nothing).
 */
#include "_shmtrace.h"

#include <string.h>

PyDoc_STRVAR(span_doc,
"A span: what span() returns, a context manager.\n\n"
"__enter__ opens it: from then on the ring shows it open, so that if the\n"
"process dies inside the block `shmtrace export --ring` (and a running\n"
"collector) shows it \"unfinished\", as C's shmtrace_begin() does.\n"
"__exit__ records it [enter, exit) with its category, name, flow id and\n"
"arguments; an exception leaving the block is not swallowed. A Span may\n"
"be entered again after it has exited (each time records one span, with\n"
"the arguments it has then), but not while it is active.\n\n"
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
	s->nargs = 0;
	memset(s->vals, 0, sizeof(s->vals));
	s->stacks = NULL;
	s->active = 0;
	return s;
}

static void span_dealloc(Span *s)
{
	/* never exited: stays on the stack, as a C span never ended does */
	pyst_open_drop(s);
	pyst_vals_clear(s->vals);
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
		/* closed meanwhile: __exit__ records nothing */
		if (s->tr->t)
			pyst_open_begin(s, s->tr->t);
	}
	Py_INCREF(s);
	return (PyObject *)s;
}

static PyObject *span_exit(Span *s)
{
	if (s->tr && s->active) {
		s->active = 0;
		/* closed meanwhile: its ids, and its handle, mean nothing any more */
		if (s->tr->t)
			pyst_open_end(s, s->tr->t);
		else
			pyst_open_drop(s);
		/* the str values stay with the span (its args point into
		 * them) until it is freed: entered again, it records them
		 * again */
	}
	Py_RETURN_NONE;
}

PyDoc_STRVAR(span_set_doc,
"set(key, value) -> None\n"
"--\n\n"
"Gives the span the argument key=value, shown in the details panel of\n"
"Perfetto and DevTools (the export's \"args\", OTLP attributes): key a str,\n"
"value an int (-2**63..2**63-1) or a str. A key set again takes the new\n"
"value. Arguments are recorded with the span when it exits; a span the\n"
"process dies in shows each key's first value. A str value goes with the record, not into\n"
"the ring's string table, so per-request values (a URL, a user id) are\n"
"fine: at most 1024 bytes of UTF-8 per text and per record, a longer one\n"
"exported cut with a marker. A span has at most 4\n"
"arguments: a fifth key is not kept, and a RuntimeWarning says so.\n"
"Raises TypeError for other types, OverflowError for an int out of range.");

static PyObject *span_set(Span *s, PyObject *const *args, Py_ssize_t nargs)
{
	if (nargs != 2) {
		PyErr_Format(PyExc_TypeError, "set() takes 2 arguments (key, value), not %zd", nargs);
		return NULL;
	}
	/* the shared no-op span has no tracer: the types are checked only */
	uint32_t at = UINT32_MAX;

	if (pyst_arg_set(s->tr, s->args, s->vals, &s->nargs, args[0], args[1], &at) < 0)
		return NULL;
	if (s->active && at < s->nargs)
		pyst_open_arg(s, at);
	Py_RETURN_NONE;
}

static PyMethodDef span_methods[] = {
	{ "set", CAST(span_set), METH_FASTCALL, span_set_doc },
	{ NULL, NULL, 0, NULL }
};

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

/*
 * __enter__ and __exit__: looked up on a span (the `with` statement), the
 * span itself, which span_call() dispatches on its arguments, so that a
 * `with` makes no bound method; looked up on the class, as
 * contextlib.ExitStack and unittest's enterContext() do
 * (type(cm).__enter__(cm)), a function that calls the span given it. A
 * getter alone gave the class its bare descriptor, which is not callable.
 */
typedef struct {
	PyObject_HEAD
	PyObject *fn;	/* what the class gives */
	const char *doc;
} SpanSlot;

static PyObject *slot_get(PyObject *self, PyObject *obj, PyObject *Py_UNUSED(type))
{
	PyObject *r = obj && obj != Py_None ? obj : ((SpanSlot *)self)->fn;

	Py_INCREF(r);
	return r;
}

static PyObject *slot_get_doc(PyObject *self, void *Py_UNUSED(c))
{
	return PyUnicode_FromString(((SpanSlot *)self)->doc);
}

static PyGetSetDef slot_getset[] = {
	{ "__doc__", slot_get_doc, NULL, NULL, NULL },
	{ NULL, NULL, NULL, NULL, NULL }
};

static void slot_dealloc(PyObject *self)
{
	Py_XDECREF(((SpanSlot *)self)->fn);
	PyObject_Del(self);
}

static PyTypeObject span_slot_type = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "shmtrace.SpanMethod",
	.tp_basicsize = sizeof(SpanSlot),
	.tp_dealloc = slot_dealloc,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_descr_get = slot_get,
	.tp_getset = slot_getset,
};

/* The class's __enter__ and __exit__: fn(span, *args) is span(*args). */
static PyObject *span_unbound(PyObject *Py_UNUSED(m), PyObject *const *args, Py_ssize_t nargs)
{
	if (nargs < 1 || Py_TYPE(args[0]) != &pyst_span_type) {
		PyErr_SetString(PyExc_TypeError, "a Span's __enter__ and __exit__ take the Span first");
		return NULL;
	}
	return PyObject_Vectorcall(args[0], args + 1, (size_t)(nargs - 1), NULL);
}

static PyMethodDef span_enter_def = { "__enter__", (PyCFunction)(void (*)(void))span_unbound,
				      METH_FASTCALL, NULL };
static PyMethodDef span_exit_def = { "__exit__", (PyCFunction)(void (*)(void))span_unbound,
				     METH_FASTCALL, NULL };

static const char enter_doc[] =
	"__enter__() opens the span: reads the clock, and shows it open in the ring.\n"
	"(The span itself, called.)";
static const char exit_doc[] =
	"__exit__(exc_type, exc, tb) ends the span: reads the clock and records it with its\n"
	"arguments. Never swallows an exception. (The span itself, called.)";

/* Puts __enter__ and __exit__ in the Span type's dict, once it is ready. */
int pyst_span_type_finish(void)
{
	static PyMethodDef *const defs[2] = { &span_enter_def, &span_exit_def };
	static const char *const docs[2] = { enter_doc, exit_doc };

	/* once: the type is static, and a module made again finds it done */
	if (span_slot_type.tp_flags & Py_TPFLAGS_READY)
		return 0;
	if (PyType_Ready(&span_slot_type) < 0)
		return -1;
	for (int i = 0; i < 2; i++) {
		SpanSlot *slot = PyObject_New(SpanSlot, &span_slot_type);
		int ret;

		if (!slot)
			return -1;
		defs[i]->ml_doc = docs[i];
		slot->doc = docs[i];
		slot->fn = PyCFunction_New(defs[i], NULL);
		ret = slot->fn ? PyDict_SetItemString(pyst_span_type.tp_dict, defs[i]->ml_name,
						      (PyObject *)slot) : -1;
		Py_DECREF(slot);
		if (ret < 0)
			return -1;
	}
	PyType_Modified(&pyst_span_type);
	return 0;
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
	.tp_methods = span_methods,
};

PYST_DOC(pyst_span_doc,
"span(name, cat=None, flow=None, args=None) -> Span\n"
"--\n\n"
"A context manager that records one span around its block.\n\n"
"    with shmtrace.span(\"handle\", cat=\"rpc\", flow=fid) as s:\n"
"        s.set(\"bytes\", len(request))\n"
"        handle(request)\n\n"
"name: the span's name (str). cat: its category (str; None: \"python\").\n"
"flow: a flow id from flow_new(), usually received from another process\n"
"with the request, that links the spans of one request across threads and\n"
"processes into one arrow in the viewers; None: the current flow\n"
"(current_flow(), set by `with shmtrace.flow(fid)`, as it is when span()\n"
"is called; none outside one); 0: none. An id may carry the span's role\n"
"in its flow: flow_recv(fid) (placed by its end, where the arrow arrives:\n"
"a wait for a reply), flow_end(fid) (ends the flow), flow_reply(fid)\n"
"(both). Chrome DevTools joins a flow only\n"
"within one category: give every span of a flow, in C and in Python, the\n"
"same cat. args: a dict of at most 4 arguments, str keys and int or str\n"
"values, as Span.set() takes them.\n\n"
"The span opens when the block is entered and ends when it is left, also\n"
"by an exception (which is not swallowed). While it is open the ring shows\n"
"it: a process killed inside it exports it \"unfinished\", nested in the\n"
"spans around it, as C's shmtrace_begin() spans (the 4 outermost open\n"
"spans of each thread are shown, as in C; a span left out of order, as\n"
"coroutines interleaving on one event loop leave theirs, and the spans\n"
"opened inside it, may not be shown, and are recorded all the same).\n"
"Names are interned once per process and cached: repeating a name costs a\n"
"dict lookup. Strings longer than 1024 bytes of UTF-8 are cut at a\n"
"character boundary.\n\n"
"Raises TypeError for arguments of the wrong type, UnicodeEncodeError for\n"
"a str that is not valid Unicode (lone surrogates), ValueError for one\n"
"with a null character or for more than 4 args, OverflowError for a flow\n"
"outside 0..2**64-1 or an int argument outside an int64. With tracing off\n"
"(no ring) it returns a shared no-op Span after checking the argument\n"
"types. A record the ring cannot take is dropped and counted\n"
"(stats().dropped), never raised.");

PyObject *pyst_span(Tracer *tr, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
	PyObject *a[4];
	uint32_t cat, name;
	uint64_t flow;
	Span *s;

	if (pyst_event_args("span", args, nargs, kwnames, a, &flow) < 0)
		return NULL;
	if (!pyst_enabled(tr)) {
		uint32_t n;

		if (a[3] && pyst_args_of(NULL, a[3], NULL, NULL, &n) < 0)
			return NULL;
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
	if (a[3] && pyst_args_of(tr, a[3], s->args, s->vals, &s->nargs) < 0) {
		Py_DECREF(s);
		return NULL;
	}
	s->cat = cat;
	s->name = name;
	s->flow = a[2] && a[2] != Py_None ? flow : pyst_current_flow();
	s->start = 0;
	return (PyObject *)s;
}
