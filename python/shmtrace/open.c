/* SPDX-License-Identifier: MIT */
/*
 * open.c - `with shmtrace.span()` as an open span: begun at __enter__ with
 * shmtrace_begin(), so that a process killed inside the block shows it
 * "unfinished", and recorded at __exit__ with shmtrace_end().
 *
 * The library's stack of open spans (one per thread and handle, in the
 * thread's staging block) wants its spans ended innermost first, on the
 * thread that began them, as C's scopes are. Python's are not always: two
 * coroutines of one event loop interleave their `with` blocks on one
 * thread, a generator suspended inside one may be resumed on another
 * thread (a sync generator streamed from a thread pool), a Span may be
 * left without being exited. Ending a span out of order would pop the
 * stack back to a depth that shows spans that ended long ago: a crash much
 * later would show them unfinished. So this file mirrors, per thread and
 * handle, the depth the stack has and which span each of its
 * SHMTRACE_OPEN_MAX kept entries is (a token, never reused), and a span
 * ends through shmtrace_end() only while its entry is still there: the
 * stack then pops to below it, and the spans above it, whose entries that
 * pop removed, end later as plain spans (shmtrace_span_args(), the same
 * record). The stack thus shows only spans that are open, and shows them
 * all whenever they were entered and left in order, as C's.
 *
 * A span left on another thread than the one it was entered on pops that
 * thread's stack from this one: safe, because the blocks of this copy of
 * the library (linked into the extension, its symbols hidden) are written
 * by this binding only, always under the GIL. Hence the mirror is not
 * plain thread-local data but a small refcounted struct that each span
 * begun on it holds, and that says whether its thread still runs (once it
 * has ended, the library has freed its blocks: nothing to pop).
 */
#include "_shmtrace.h"

#include <stdbool.h>

#define OPEN_STACKS	4	/* handles a thread may have spans open on at once */

struct pyst_open_stack {
	shmtrace_t *t;		/* the handle whose stack this mirrors; NULL: free */
	uint32_t depth;		/* the stack's depth as this file left it */
	uint64_t tok[SHMTRACE_OPEN_MAX];	/* the span each kept entry is */
};

/* A thread's mirrors: held by its thread state's dict (a capsule, freed
 * when the thread ends) and by each Span begun on them. GIL only. */
struct pyst_open_stacks {
	Py_ssize_t refs;
	int alive;		/* 0 once its thread has ended */
	struct pyst_open_stack st[OPEN_STACKS];
	/* every thread's, for pyst_open_forget() */
	struct pyst_open_stacks *next, **pprev;
};

#define CAPSULE_NAME	"shmtrace.open_stacks"

/* initial-exec, as the library's own: no __tls_get_addr() call per span */
/* the module's default TLS model: a module loaded late takes no static TLS
 * (libshm/lib/core.h, SHMT_TLS) */
static __thread struct pyst_open_stacks *mine;
static uint64_t last_token;	/* under the GIL */
static struct pyst_open_stacks *all_stacks;	/* under the GIL */

static void stacks_unref(struct pyst_open_stacks *m)
{
	if (m && --m->refs == 0) {
		*m->pprev = m->next;
		if (m->next)
			m->next->pprev = m->pprev;
		PyMem_RawFree(m);
	}
}

/* The capsule's destructor: its thread state is being cleared, the thread
 * is ending (or the interpreter is) */
static void stacks_thread_ended(PyObject *capsule)
{
	struct pyst_open_stacks *m = PyCapsule_GetPointer(capsule, CAPSULE_NAME);

	if (!m)
		return;
	m->alive = 0;
	if (mine == m)
		mine = NULL;
	stacks_unref(m);
}

/* The calling thread's mirrors, made on its first span; NULL (no
 * exception) when they cannot be: its spans are then not pushed. */
static struct pyst_open_stacks *thread_stacks(void)
{
	static PyObject *key;
	struct pyst_open_stacks *m;
	PyObject *dict, *capsule;
	int ret;

	if (mine)
		return mine;
	dict = PyThreadState_GetDict();
	if (!dict || (!key && !(key = PyUnicode_InternFromString(CAPSULE_NAME)))) {
		PyErr_Clear();
		return NULL;
	}
	m = PyMem_RawCalloc(1, sizeof(*m));
	if (!m)
		return NULL;
	m->refs = 1;
	m->alive = 1;
	m->next = all_stacks;
	if (all_stacks)
		all_stacks->pprev = &m->next;
	m->pprev = &all_stacks;
	all_stacks = m;
	capsule = PyCapsule_New(m, CAPSULE_NAME, stacks_thread_ended);
	if (!capsule) {
		stacks_unref(m);
		PyErr_Clear();
		return NULL;
	}
	ret = PyDict_SetItem(dict, key, capsule);
	Py_DECREF(capsule);	/* on failure, frees m */
	if (ret < 0) {
		PyErr_Clear();
		return NULL;
	}
	mine = m;
	return m;
}

/* The mirror of t's stack among m's: its own, or one whose spans have all
 * ended; -1 when every one holds open spans of other handles (then the
 * span is not pushed at all, and is recorded at its end). */
static int stack_of(struct pyst_open_stacks *m, shmtrace_t *t)
{
	int free = -1;

	for (int i = 0; i < OPEN_STACKS; i++) {
		if (m->st[i].t == t)
			return i;
		if (free < 0 && (!m->st[i].t || m->st[i].depth == 0))
			free = i;
	}
	if (free >= 0) {
		m->st[free].t = t;
		m->st[free].depth = 0;
	}
	return free;
}

void pyst_open_begin(Span *s, shmtrace_t *t)
{
	struct pyst_open_stacks *m = thread_stacks();
	struct pyst_open_stack *st;
	int i = m ? stack_of(m, t) : -1;
	uint32_t d;

	s->stacks = NULL;
	if (i < 0) {
		s->start = shmtrace_now();
		return;
	}
	shmtrace_begin(t, &s->sp, s->cat, s->name, s->flow);
	s->start = s->sp.start;
	s->handed = 0;
	/* the library's fields, read only: whether it pushed the span (not
	 * when there is no ring yet, or no staging block for the thread), and
	 * at which depth */
	if (!s->sp.block_)
		return;
	st = &m->st[i];
	d = s->sp.depth_;
	st->depth = d + 1;
	s->token = ++last_token;
	if (d < SHMTRACE_OPEN_MAX)
		st->tok[d] = s->token;
	m->refs++;
	s->stacks = m;
	s->stack = (uint32_t)i;
	/* those of span(args=): staged now, as C's shmtrace_span_arg() does */
	for (uint32_t k = 0; k < s->nargs; k++)
		pyst_open_arg(s, k);
}

/* Whether span s, begun on t's stack, still has its entry there: its
 * thread lives, and the entry at its depth is its own (deeper entries are
 * counted by the library, not kept: the depth alone says whether a deep
 * span is still on the stack). One that ended out of order took it off. */
static bool on_stack(const Span *s, shmtrace_t *t)
{
	const struct pyst_open_stacks *m = s->stacks;
	const struct pyst_open_stack *st = m ? &m->st[s->stack] : NULL;
	uint32_t d = s->sp.depth_;

	return st && m->alive && st->t == t && st->depth > d &&
	       (d >= SHMTRACE_OPEN_MAX || st->tok[d] == s->token);
}

void pyst_open_arg(Span *s, uint32_t i)
{
	/* not on the ring's stack (never, or no more): all go at exit; staged
	 * now, it would land on the entry another span has at its depth */
	if (!s->stacks || !on_stack(s, s->tr ? s->tr->t : NULL))
		return;
	if (i < s->handed) {
		/* a key set again: the crash view keeps the first value, the
		 * end the last (sp's copy, which shmtrace_end() writes) */
		s->sp.args[i] = s->args[i];
		return;
	}
	if (i == s->handed && shmtrace_span_arg(&s->sp, s->args[i]) == 0)
		s->handed++;
}

void pyst_open_end(Span *s, shmtrace_t *t)
{
	uint32_t d = s->sp.depth_;

	if (on_stack(s, t)) {
		for (uint32_t i = s->handed; i < s->nargs; i++)
			shmtrace_span_arg(&s->sp, s->args[i]);
		shmtrace_end(&s->sp);
		s->stacks->st[s->stack].depth = d;
	} else {
		shmtrace_span_args(t, s->cat, s->name, s->start, shmtrace_now(), s->flow, s->args,
				   s->nargs);
	}
	pyst_open_drop(s);
}

void pyst_open_drop(Span *s)
{
	stacks_unref(s->stacks);
	s->stacks = NULL;
}

/* Handle t is being closed: every thread's mirror of its stack goes, so
 * that its spans end as plain spans (on_stack() fails), and a handle
 * opened later at the same address starts on a mirror of its own. */
void pyst_open_forget(shmtrace_t *t)
{
	for (struct pyst_open_stacks *m = all_stacks; m; m = m->next)
		for (int i = 0; i < OPEN_STACKS; i++)
			if (m->st[i].t == t)
				m->st[i].t = NULL;
}
