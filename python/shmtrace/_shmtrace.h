/* SPDX-License-Identifier: MIT */
/*
 * _shmtrace.h - what the C files of the CPython binding of libshmtrace
 * share: the Tracer and Span objects, the argument helpers, the record calls
 * and their docstrings (a Tracer method and a module function share both).
 *
 * Everything on the hot path is C: `with shmtrace.span("x", cat="rpc")`
 * costs one vectorcall with hand-parsed arguments, two pointer compares
 * (the (name, cat) ids are cached by the identity of the str objects, behind
 * a dict keyed by their value, so a name is interned once per tracer), a
 * Span from a freelist, two calls of the Span itself as its __enter__ and
 * __exit__ (no bound-method objects), shmtrace_begin() and shmtrace_end()
 * (open.c), and, with no flow= given, one read of the current flow's
 * ContextVar. The GIL is held across every call that uses a handle,
 * so close() can never free a handle another thread is inside. Records the
 * ring cannot take are dropped and counted by the library (stats().dropped),
 * never raised: tracing must not change the control flow of the traced
 * program.
 */
#ifndef SHMTRACE_PY_SHMTRACE_H
#define SHMTRACE_PY_SHMTRACE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>

#include "shmtrace.h"

#define MAX_STRING	SHMTRACE_STRING_MAX	/* libshmtrace cuts interned strings here */
#define MAX_NAME	SHMTRACE_NAME_MAX	/* and thread/process names here */
#define CACHE_MAX	65536	/* more distinct names than a ring can hold */
#define DEFAULT_CAT	"python"
#define PAIR_SLOTS	64	/* (name, cat) pairs cached by identity; a power of 2 */
#define SPAN_FREE	16	/* Span objects kept for reuse */

#define FASTKW (METH_FASTCALL | METH_KEYWORDS)
#define CAST(f) ((PyCFunction)(void (*)(void))(f))
/* a docstring one file defines and another's method table uses */
#define PYST_DOC(name, str) const char name[] = PyDoc_STR(str)

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
	/* calls of this process running without the GIL on t (tracer.c,
	 * pyst_unlocked_begin()), atomic: close waits for them */
	int unlocked;
	pid_t unlocked_pid;
} Tracer;

struct pyst_open_stacks;	/* open.c */

/* One span of a `with`: begun by __enter__ (shmtrace_begin(): the thread's
 * open-span stack in the ring shows it until __exit__ records it), unless
 * open.c keeps it off that stack; then it is timed here and recorded at its
 * exit all the same. Its arguments are kept here, so that set() can replace
 * a key's value; while it is on the ring's stack each key is also handed
 * to the library when first given (shmtrace_span_arg(): staged at once,
 * so a crash inside the span shows it), a later value of the key put in
 * sp's copy for the end (open.c, pyst_open_arg()). */
typedef struct {
	PyObject_HEAD
	vectorcallfunc vectorcall;	/* span_call: __enter__ and __exit__ */
	Tracer *tr;		/* NULL for the shared no-op span */
	struct shmtrace_open_span sp;	/* valid while active and stacks != NULL */
	struct pyst_open_stacks *stacks;	/* its entry's thread (open.c); NULL: none */
	uint32_t stack;		/* and handle there */
	uint64_t token;		/* and which entry */
	uint64_t start;
	uint64_t flow;
	uint32_t cat, name;
	uint32_t nargs;
	uint32_t handed;	/* args[0..handed) given to the library already */
	struct shmtrace_arg args[SHMTRACE_MAX_ARGS];
	/* the str values of args, kept alive until the span is recorded: a
	 * text argument's bytes are read then */
	PyObject *vals[SHMTRACE_MAX_ARGS];
	int active;
} Span;

extern PyTypeObject pyst_tracer_type, pyst_span_type, pyst_stats_type;
/* Once the Span type is ready: its __enter__ and __exit__ (span.c). 0, or
 * -1 with a Python error set. */
int pyst_span_type_finish(void);
extern PyStructSequence_Desc pyst_stats_desc;
extern PyObject *pyst_error;		/* shmtrace.Error */
extern Tracer *pyst_default_tracer;	/* of the module-level calls; never NULL after init */
extern int pyst_default_from_env;	/* 1: it may still attach to $SHMTRACE_RING */
extern Span *pyst_null_span;		/* what span() returns with tracing off */
extern PyObject *pyst_str_name, *pyst_str_cat, *pyst_str_flow, *pyst_str_value, *pyst_str_args,
	*pyst_str_default_cat;		/* interned keyword names, and DEFAULT_CAT */
extern PyObject *pyst_flow_var;		/* the ContextVar of current_flow() */
/* 1 once this thread's name is in the ring (the library keeps it for the
 * rings the thread writes to later, and across fork) */
extern __thread int pyst_tls_named;

/* args.c: Python values in, C values out; each returns NULL or -1 with a
 * Python exception set */
PyObject *pyst_raise(int ret, PyObject *filename);
const char *pyst_utf8_of(PyObject *s, const char *what, Py_ssize_t *len);
void pyst_copy_cut(char *buf, const char *u, Py_ssize_t len, Py_ssize_t max);
int pyst_parse_args(const char *fn, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
		    PyObject **keys, int nkeys, int nrequired, PyObject **out);
int pyst_check_name_cat(PyObject *name, PyObject *cat);
int pyst_get_flow(PyObject *o, uint64_t *flow);
uint64_t pyst_current_flow(void);
int pyst_event_args(const char *fn, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
		    PyObject **a, uint64_t *flow);
int pyst_arg_set(Tracer *tr, struct shmtrace_arg *args, PyObject **vals, uint32_t *n, PyObject *key,
		 PyObject *value, uint32_t *at);
int pyst_args_of(Tracer *tr, PyObject *mapping, struct shmtrace_arg *args, PyObject **vals,
		 uint32_t *n);
/* open.c: argument i of s was set (new or replaced): handed to the
 * library now if s is on the ring's stack. */
void pyst_open_arg(Span *s, uint32_t i);
/* Drops the references pyst_arg_set() kept in vals[0..SHMTRACE_MAX_ARGS). */
void pyst_vals_clear(PyObject **vals);

/* tracer.c */
Tracer *pyst_tracer_new(shmtrace_t *t, int owned, PyObject *ring);
Tracer *pyst_dflt(void);
void pyst_name_thread(Tracer *tr);
shmtrace_t *pyst_unlocked_begin(Tracer *tr);
void pyst_unlocked_end(Tracer *tr);
/* Library calls running without the GIL now, all tracers: the exit waits
 * for them (tracer.c, pyst_unlocked_at_exit()) */
extern int pyst_unlocked_running;
void pyst_unlocked_setup(void);
void pyst_unlocked_at_exit(void);
/* Runs stmt, a library call that may wait for the ring lock, without the
 * GIL; counted out before the GIL is asked for again, which a daemon
 * thread at the interpreter's end never gets back */
#define PYST_UNLOCKED(stmt)							\
	do {									\
		__atomic_add_fetch(&pyst_unlocked_running, 1, __ATOMIC_ACQ_REL);	\
		Py_BEGIN_ALLOW_THREADS						\
		stmt;								\
		__atomic_sub_fetch(&pyst_unlocked_running, 1, __ATOMIC_RELEASE);	\
		Py_END_ALLOW_THREADS						\
	} while (0)
/* PYST_UNLOCKED(stmt) with t, tr's handle, held (a close waits for it);
 * not run when tr is off (t NULL). The hold ends without the GIL too. */
#define PYST_HOLDING(tr, t, stmt)						\
	do {									\
		shmtrace_t *t = pyst_unlocked_begin(tr);			\
		if (t)								\
			PYST_UNLOCKED(stmt; pyst_unlocked_end(tr));		\
		else								\
			pyst_unlocked_end(tr);					\
	} while (0)
uint32_t pyst_intern(Tracer *tr, PyObject *s, const char *what, int *ok);
int pyst_intern_name_cat(Tracer *tr, PyObject *name, PyObject *cat, uint32_t *name_id,
			 uint32_t *cat_id);
void pyst_pairs_clear(Tracer *tr);

/* 1 when tr records (naming the calling thread on its first record), 0
 * when it is off */
static inline int pyst_enabled(Tracer *tr)
{
	if (!tr->t)
		return 0;
	if (!pyst_tls_named)
		pyst_name_thread(tr);
	/* naming lets other threads run (pyst_unlocked_begin()): one may
	 * have closed the tracer meanwhile */
	return tr->t != NULL;
}

/* open.c: a Span's __enter__ and __exit__ on the thread's open-span stack;
 * pyst_open_drop() forgets a span that will not be ended */
void pyst_open_begin(Span *s, shmtrace_t *t);
void pyst_open_end(Span *s, shmtrace_t *t);
void pyst_open_drop(Span *s);
void pyst_open_forget(shmtrace_t *t);

/* span.c */
Span *pyst_span_alloc(void);
PyObject *pyst_span(Tracer *tr, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);

/* records.c: the record calls, each a Tracer method as it stands */
PyObject *pyst_instant(Tracer *tr, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);
PyObject *pyst_counter(Tracer *tr, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);
PyObject *pyst_trigger(Tracer *tr, PyObject *arg);
PyObject *pyst_flow_new(Tracer *tr, PyObject *unused);
PyObject *pyst_set_name(Tracer *tr, PyObject *arg, int process);
PyObject *pyst_set_thread_name(Tracer *tr, PyObject *arg);
PyObject *pyst_set_process_name(Tracer *tr, PyObject *arg);
PyObject *pyst_flush(Tracer *tr, PyObject *unused);
PyObject *pyst_stats(Tracer *tr, PyObject *unused);

extern const char pyst_span_doc[], pyst_instant_doc[], pyst_counter_doc[], pyst_trigger_doc[],
	pyst_flow_new_doc[],
	pyst_set_thread_name_doc[], pyst_set_process_name_doc[], pyst_flush_doc[], pyst_stats_doc[];

#endif /* SHMTRACE_PY_SHMTRACE_H */
