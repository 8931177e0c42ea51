/* SPDX-License-Identifier: MIT */
/*
 * args.c - the Python values the binding takes, checked and turned into C ones
 * (hand-parsed fast-call arguments, str to cut UTF-8, flow ids), and the
 * library's -errno turned into a shmtrace.Error.
 */
#include "_shmtrace.h"

#include <string.h>


PyObject *pyst_raise(int ret, PyObject *filename)
{
	PyObject *e;

	if (filename)
		e = PyObject_CallFunction(pyst_error, "isO", -ret, shmtrace_strerror(ret), filename);
	else
		e = PyObject_CallFunction(pyst_error, "is", -ret, shmtrace_strerror(ret));
	if (e) {
		PyErr_SetObject(pyst_error, e);
		Py_DECREF(e);
	}
	return NULL;
}

/* UTF-8 of a str with no NUL in it; NULL with an exception set. */
const char *pyst_utf8_of(PyObject *s, const char *what, Py_ssize_t *len)
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
void pyst_copy_cut(char *buf, const char *u, Py_ssize_t len, Py_ssize_t max)
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

/* Parses (name, cat=None, flow=0) or (name, value, cat=None) by hand: the
 * generic argument parser would cost more than the record itself. keys
 * lists the parameter names; out receives borrowed references. */
int pyst_parse_args(const char *fn, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
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
int pyst_check_name_cat(PyObject *name, PyObject *cat)
{
	if (check_str(name, "name", 0) < 0 || (cat && check_str(cat, "cat", 1) < 0))
		return -1;
	return 0;
}

/* The arguments of span() and instant(): name, cat=None, flow=None,
 * args=None, checked; a[0..3] the name, cat, flow and args objects, *flow
 * the flow given (0 for None or none, where the caller takes
 * pyst_current_flow() instead: only once it knows the tracer is on). */
int pyst_event_args(const char *fn, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
		    PyObject **a, uint64_t *flow)
{
	PyObject *keys[4] = { pyst_str_name, pyst_str_cat, pyst_str_flow, pyst_str_args };

	if (pyst_parse_args(fn, args, nargs, kwnames, keys, 4, 1, a) < 0)
		return -1;
	return pyst_check_name_cat(a[0], a[1]) < 0 || pyst_get_flow(a[2], flow) < 0 ? -1 : 0;
}

/* The flow of current_flow(): what the innermost `with shmtrace.flow()`
 * of this context set, 0 outside any. A value that is not a flow id (only
 * the ContextVar itself, set by hand, can hold one) counts as none. */
uint64_t pyst_current_flow(void)
{
	PyObject *v;
	uint64_t flow = 0;

	if (PyContextVar_Get(pyst_flow_var, NULL, &v) < 0) {
		PyErr_Clear();
		return 0;
	}
	if (v && pyst_get_flow(v, &flow) < 0) {
		PyErr_Clear();
		flow = 0;
	}
	Py_XDECREF(v);
	return flow;
}

/* Adds key=value (a str, and an int or a str) to the arguments args[0..*n)
 * of a record of tr, or replaces the value of that key: the
 * library would keep both, and a viewer show one of them. With tracing
 * off (tr NULL or off) it only checks the types, as for names. Beyond SHMTRACE_MAX_ARGS keys the
 * argument is not kept and a RuntimeWarning says so: it is no reason to
 * change the traced program's control flow. The key is interned; a str
 * value is a text argument (SHMTRACE_ARG_TEXT: its bytes go with the
 * record, not into the ring's string table, so per-request values such as
 * URLs never use it up), its str kept in vals[i] until the record is
 * written (pyst_vals_clear()). *at (when not NULL) is the index it was
 * put at, left as it was when it was not kept. Returns 0, or -1 with an
 * exception set. */
int pyst_arg_set(Tracer *tr, struct shmtrace_arg *args, PyObject **vals, uint32_t *n,
		 PyObject *key, PyObject *value, uint32_t *at)
{
	const char *text = NULL;
	Py_ssize_t len;
	struct shmtrace_arg a;
	uint32_t i;
	int ok;

	if (!PyUnicode_Check(key)) {
		PyErr_Format(PyExc_TypeError, "an argument's key must be str, not %.100s",
			     Py_TYPE(key)->tp_name);
		return -1;
	}
	if (PyLong_Check(value)) {
		long long v = PyLong_AsLongLong(value);

		if (v == -1 && PyErr_Occurred())
			return -1;	/* OverflowError: beyond an int64 */
		a = shmtrace_arg_int(0, v);
	} else if (PyUnicode_Check(value)) {
		if (!(text = pyst_utf8_of(value, "an argument's value", &len)))
			return -1;
		a = shmtrace_arg_text(0, text);
	} else {
		PyErr_Format(PyExc_TypeError, "argument %R must be int or str, not %.100s", key,
			     Py_TYPE(value)->tp_name);
		return -1;
	}
	if (!tr || !tr->t)
		return 0;
	a.key = pyst_intern(tr, key, "an argument's key", &ok);
	if (!ok)
		return -1;
	for (i = 0; i < *n && args[i].key != a.key; i++)
		;
	if (i == SHMTRACE_MAX_ARGS)
		return PyErr_WarnFormat(PyExc_RuntimeWarning, 1, "argument %R not kept: a record "
					"has at most %d arguments", key, SHMTRACE_MAX_ARGS);
	args[i] = a;
	Py_XSETREF(vals[i], text ? Py_NewRef(value) : NULL);
	if (at)
		*at = i;
	if (i == *n)
		(*n)++;
	return 0;
}

/* Checks that a record can hold size arguments. */
static int args_fit(Py_ssize_t size)
{
	if (size <= SHMTRACE_MAX_ARGS)
		return 0;
	PyErr_Format(PyExc_ValueError, "args has %zd keys: a record has at most %d arguments",
		     size, SHMTRACE_MAX_ARGS);
	return -1;
}

/* The arguments of args= (a dict, or another mapping, of at most
 * SHMTRACE_MAX_ARGS keys, or None), into args[0..*n). Returns 0, or -1
 * with an exception set. */
void pyst_vals_clear(PyObject **vals)
{
	for (int i = 0; i < SHMTRACE_MAX_ARGS; i++)
		Py_CLEAR(vals[i]);
}

int pyst_args_of(Tracer *tr, PyObject *mapping, struct shmtrace_arg *args, PyObject **vals,
		 uint32_t *n)
{
	PyObject *items, *k, *v;
	Py_ssize_t pos = 0;
	int ret = 0;

	*n = 0;
	if (!mapping || mapping == Py_None)
		return 0;
	if (PyDict_Check(mapping)) {
		if (args_fit(PyDict_GET_SIZE(mapping)) < 0)
			return -1;
		/* a key's intern lets other threads run (tracer.c), which may
		 * change the dict: its items are held while in use, and a
		 * key beyond the fifth is refused as set() refuses it */
		while (ret == 0 && PyDict_Next(mapping, &pos, &k, &v)) {
			Py_INCREF(k);
			Py_INCREF(v);
			ret = pyst_arg_set(tr, args, vals, n, k, v, NULL);
			Py_DECREF(k);
			Py_DECREF(v);
		}
		return ret;
	}
	/* a mapping as dict() takes one: any object with keys() (UserDict,
	 * ChainMap, a mappingproxy), its items() listed once */
	if (!PyObject_HasAttrString(mapping, "keys")) {
		PyErr_Format(PyExc_TypeError, "args must be a mapping or None, not %.100s",
			     Py_TYPE(mapping)->tp_name);
		return -1;
	}
	items = PyMapping_Items(mapping);
	if (!items) {
		/* keys() and no items(): no mapping either */
		if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
			PyErr_Clear();
			PyErr_Format(PyExc_TypeError, "args must be a mapping or None, not %.100s",
				     Py_TYPE(mapping)->tp_name);
		}
		return -1;
	}
	ret = args_fit(PyList_GET_SIZE(items));
	for (pos = 0; ret == 0 && pos < PyList_GET_SIZE(items); pos++) {
		PyObject *kv = PyList_GET_ITEM(items, pos);

		if (!PyTuple_Check(kv) || PyTuple_GET_SIZE(kv) != 2) {
			PyErr_SetString(PyExc_TypeError, "args.items() must give (key, value) pairs");
			ret = -1;
		} else {
			ret = pyst_arg_set(tr, args, vals, n, PyTuple_GET_ITEM(kv, 0),
					   PyTuple_GET_ITEM(kv, 1), NULL);
		}
	}
	Py_DECREF(items);
	return ret;
}

/* A flow id: None or an int in 0..2^64-1. */
int pyst_get_flow(PyObject *o, uint64_t *flow)
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
