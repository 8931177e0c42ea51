/* SPDX-License-Identifier: MIT */
/*
 * tracer.c - the Tracer object (one handle on a ring) and what every record
 * call needs from it: name ids interned once and cached, the thread named on
 * first use, the default tracer of the module-level calls.
 */
#include "_shmtrace.h"

#include <pthread.h>
#include <string.h>
#include <time.h>
#include <structmember.h>

PyObject *pyst_threading_mod;
__thread int pyst_tls_named;

/*
 * The calls that may wait for the ring lock, up to the library's 100 ms
 * while another process holds it (interning a string the tracer has not
 * seen, naming a thread or the process, flushing, closing), wait without
 * the GIL, so that the program's other threads go on meanwhile. Such a
 * call holds the tracer's handle between pyst_unlocked_begin(), under the
 * GIL, and pyst_unlocked_end(), still without it: a daemon thread at the
 * interpreter's end never gets the GIL back, and a close waiting for it
 * would wait for good. A close turns the tracer off at once (its calls
 * are no-ops from then on) and waits for them before it closes the
 * handle; the close holds the handle as such a call does, so that a
 * second close returns only once the first is done. The calls that stage
 * records keep the GIL: their wait for the lock is bounded at 2 ms, and
 * the open-span mirrors (open.c) are safe only under it. A fork leaves in
 * the child no thread of those counted: the counts are the process's that
 * made them.
 */
static pthread_mutex_t unlocked_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t unlocked_done = PTHREAD_COND_INITIALIZER;
int pyst_unlocked_running;

/* A fork copies the mutex as a closer of the parent held it, and the
 * count of calls other threads of the parent were in */
static void unlocked_after_fork(void)
{
	pthread_mutex_init(&unlocked_mu, NULL);
	pthread_cond_init(&unlocked_done, NULL);
	__atomic_store_n(&pyst_unlocked_running, 0, __ATOMIC_RELAXED);
}

static void unlocked_init(void)
{
	pthread_atfork(NULL, NULL, unlocked_after_fork);
}

/* At the module's import, before any thread can be in such a call. */
void pyst_unlocked_setup(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, unlocked_init);
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* At the interpreter's end (Py_AtExit()): a daemon thread may still be in
 * a library call without the GIL, on a handle the library closes as the
 * process exits. It returns within the library's bound on a lock wait
 * (100 ms, or 2 ms once the holder is seen stopped); waited for that long
 * and a little more, never for good. */
void pyst_unlocked_at_exit(void)
{
	struct timespec nap = { 0, 100000 };
	uint64_t end = mono_ns() + 300 * 1000000ull;

	while (__atomic_load_n(&pyst_unlocked_running, __ATOMIC_ACQUIRE) && mono_ns() < end)
		nanosleep(&nap, NULL);
}

/* Calls holding tr's handle now; the caller holds the GIL. */
static int unlocked_calls(Tracer *tr)
{
	return tr->unlocked_pid == getpid() ? __atomic_load_n(&tr->unlocked, __ATOMIC_ACQUIRE) : 0;
}

/* The handle to call without the GIL (NULL: off), held until
 * pyst_unlocked_end(). Under the GIL. */
shmtrace_t *pyst_unlocked_begin(Tracer *tr)
{
	if (tr->unlocked_pid != getpid()) {
		tr->unlocked = 0;	/* a parent's, before a fork */
		tr->unlocked_pid = getpid();
	}
	__atomic_add_fetch(&tr->unlocked, 1, __ATOMIC_ACQ_REL);
	return tr->t;
}

/* With or without the GIL. Each end is told under the mutex, so that a
 * waiter that looked at the count under it misses none: a close waits for
 * all calls but its own, a second close for all of them. */
void pyst_unlocked_end(Tracer *tr)
{
	pthread_mutex_lock(&unlocked_mu);
	__atomic_sub_fetch(&tr->unlocked, 1, __ATOMIC_RELEASE);
	pthread_cond_broadcast(&unlocked_done);
	pthread_mutex_unlock(&unlocked_mu);
}

/* Waits, without the GIL, until at most keep calls hold tr's handle. */
static void unlocked_wait(Tracer *tr, int keep)
{
	if (unlocked_calls(tr) <= keep)
		return;
	Py_BEGIN_ALLOW_THREADS
	pthread_mutex_lock(&unlocked_mu);
	while (__atomic_load_n(&tr->unlocked, __ATOMIC_ACQUIRE) > keep)
		pthread_cond_wait(&unlocked_done, &unlocked_mu);
	pthread_mutex_unlock(&unlocked_mu);
	Py_END_ALLOW_THREADS
}

/* The id of s in tr's ring, cached per tracer. Returns 0 with an exception
 * set on a bad argument; an id of 0 from a full string table is a valid
 * result (exported as "?"), hence the separate *ok. */
uint32_t pyst_intern(Tracer *tr, PyObject *s, const char *what, int *ok)
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
	u = pyst_utf8_of(s, what, &len);
	if (!u)
		return 0;
	pyst_copy_cut(buf, u, len, MAX_STRING);
	id = 0;
	PYST_HOLDING(tr, t, id = shmtrace_intern(t, buf));
	/* only exact str keys: a subclass could hash differently, or hold
	 * a reference back to the tracer; never id 0, what an intern that
	 * could not have the lock returns (the library keeps its lasting
	 * failures itself): cached, the name stayed "?" for the tracer's life */
	if (id && PyUnicode_CheckExact(s) && PyDict_GET_SIZE(tr->cache) < CACHE_MAX) {
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
void pyst_name_thread(Tracer *tr)
{
	PyObject *exc_type, *exc_val, *exc_tb, *th, *name;
	char buf[MAX_NAME + 1];
	const char *u;
	Py_ssize_t len;

	pyst_tls_named = 1;
	PyErr_Fetch(&exc_type, &exc_val, &exc_tb);
	if (!pyst_threading_mod)
		pyst_threading_mod = PyImport_ImportModule("threading");
	th = pyst_threading_mod ? PyObject_CallMethod(pyst_threading_mod, "current_thread", NULL) : NULL;
	name = th ? PyObject_GetAttrString(th, "name") : NULL;
	if (name && PyUnicode_Check(name) && (u = PyUnicode_AsUTF8AndSize(name, &len))) {
		pyst_copy_cut(buf, u, len, MAX_NAME);
		PYST_HOLDING(tr, t, shmtrace_set_thread_name(t, buf));
	}
	Py_XDECREF(name);
	Py_XDECREF(th);
	PyErr_Clear();
	PyErr_Restore(exc_type, exc_val, exc_tb);
}

/* Interns a record's name and cat (checked by pyst_check_name_cat(); no cat:
 * DEFAULT_CAT). Returns 0, or -1 with a Python error set. */
int pyst_intern_name_cat(Tracer *tr, PyObject *name, PyObject *cat, uint32_t *name_id,
			   uint32_t *cat_id)
{
	struct pair *p;
	int ok;

	if (!cat || cat == Py_None)
		cat = pyst_str_default_cat;
	p = &tr->pairs[(((uintptr_t)name >> 4) ^ ((uintptr_t)cat >> 6)) & (PAIR_SLOTS - 1)];
	if (p->name == name && p->cat == cat) {
		*name_id = p->name_id;
		*cat_id = p->cat_id;
		return 0;
	}
	*name_id = pyst_intern(tr, name, "name", &ok);
	if (!ok)
		return -1;
	*cat_id = pyst_intern(tr, cat, "cat", &ok);
	if (!ok)
		return -1;
	/* exact str only: a subclass instance could refer back to the tracer;
	 * an id 0 is not kept (pyst_intern()) */
	if (*name_id && *cat_id && PyUnicode_CheckExact(name) && PyUnicode_CheckExact(cat)) {
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

void pyst_pairs_clear(Tracer *tr)
{
	for (int i = 0; i < PAIR_SLOTS; i++) {
		Py_CLEAR(tr->pairs[i].name);
		Py_CLEAR(tr->pairs[i].cat);
	}
}

/* 1 while the module-level functions use the library's default handle
 * (SHMTRACE_RING), which may attach after import: the ring can appear
 * later (the library's own thread looks for it every 100 ms) */
int pyst_default_from_env;

/* The tracer of the module-level functions (always set after init). */
Tracer *pyst_dflt(void)
{
	if (pyst_default_from_env && !pyst_default_tracer->t) {
		/* pairs with the release store in the library's watcher */
		shmtrace_t *t = __atomic_load_n(&shmtrace_default, __ATOMIC_ACQUIRE);

		if (t) {
			const char *env = getenv("SHMTRACE_RING");
			PyObject *ring = env ? PyUnicode_DecodeFSDefault(env) : NULL;

			pyst_default_tracer->t = t;
			if (ring) {
				Py_DECREF(pyst_default_tracer->ring);
				pyst_default_tracer->ring = ring;
			} else {
				PyErr_Clear();
			}
		}
	}
	return pyst_default_tracer;
}

static void tracer_detach(Tracer *tr)
{
	shmtrace_t *t = tr->t;

	tr->t = NULL;
	if (tr == pyst_default_tracer && pyst_default_from_env) {
		/* SHMTRACE_RING's tracer closed: it stays closed, though its
		 * ring appears after (the library's watcher stops waiting) */
		pyst_default_from_env = 0;
		if (!t)
			shmtrace_default_open(NULL);
	}
	if (!t) {
		/* closed, or closing in another thread: returns once that
		 * close is done, which holds the handle as a call does */
		unlocked_wait(tr, 0);
		return;
	}
	pyst_unlocked_begin(tr);
	pyst_open_forget(t);
	unlocked_wait(tr, 1);
	PYST_UNLOCKED(
		if (tr->owned)
			shmtrace_close(t);
		else if (t == shmtrace_default)
			shmtrace_default_open(NULL);	/* closes it */
		pyst_unlocked_end(tr)
	);
}

PyDoc_STRVAR(close_doc,
"close() -> None\n"
"--\n\n"
"Flushes this process's staged records into the ring and detaches; the\n"
"tracer is off from then on (its calls are no-ops). Also what leaving a\n"
"`with shmtrace.open(...) as t:` block does. Closing twice is harmless: a\n"
"close while another thread closes returns once that close is done.");

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
	pyst_pairs_clear(tr);
	Py_TYPE(tr)->tp_free((PyObject *)tr);
}

Tracer *pyst_tracer_new(shmtrace_t *t, int owned, PyObject *ring)
{
	Tracer *tr = PyObject_New(Tracer, &pyst_tracer_type);

	if (!tr)
		return NULL;
	tr->t = t;
	tr->owned = owned;
	tr->unlocked = 0;
	tr->unlocked_pid = 0;
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

static PyMethodDef tracer_methods[] = {
	{ "span", CAST(pyst_span), FASTKW, pyst_span_doc },
	{ "instant", CAST(pyst_instant), FASTKW, pyst_instant_doc },
	{ "counter", CAST(pyst_counter), FASTKW, pyst_counter_doc },
	{ "trigger", CAST(pyst_trigger), METH_O, pyst_trigger_doc },
	{ "flow_new", CAST(pyst_flow_new), METH_NOARGS, pyst_flow_new_doc },
	{ "set_thread_name", CAST(pyst_set_thread_name), METH_O, pyst_set_thread_name_doc },
	{ "set_process_name", CAST(pyst_set_process_name), METH_O, pyst_set_process_name_doc },
	{ "flush", CAST(pyst_flush), METH_NOARGS, pyst_flush_doc },
	{ "stats", CAST(pyst_stats), METH_NOARGS, pyst_stats_doc },
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
"the module (span, instant, counter, trigger, flow_new, set_thread_name,\n"
"set_process_name, flush, stats) on this ring. A context manager that\n"
"closes it. It stays valid across fork(): the child records under its\n"
"own pid.");

PyTypeObject pyst_tracer_type = {
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
