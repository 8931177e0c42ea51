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

/* The id of s in tr's ring, cached per tracer. Returns 0 with an exception
 * set on a bad argument; an id of 0 from a full string table is a valid
 * result (exported as "?"), hence the separate *ok. */

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
 * checked; a[0..2] the name, cat and flow objects. */
int pyst_event_args(const char *fn, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
		    PyObject **a, uint64_t *flow)
{
	PyObject *keys[3] = { pyst_str_name, pyst_str_cat, pyst_str_flow };

	if (pyst_parse_args(fn, args, nargs, kwnames, keys, 3, 1, a) < 0)
		return -1;
	return pyst_check_name_cat(a[0], a[1]) < 0 || pyst_get_flow(a[2], flow) < 0 ? -1 : 0;
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
