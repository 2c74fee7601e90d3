/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * kv - a key-value server speaking a subset of RESP, the Redis protocol:
 * PING, GET, SET, DEL, INCR, QUIT (and CONFIG GET, COMMAND answered empty).
 * One fiber per connection; requests are pipelined: every complete command
 * in the buffer is answered, and the answers go out in one write.
 *
 *   kv [--port N] [--workers N] [--addr A.B.C.D]     (redis-cli -p N ping)
 *
 * The store is a hash table in 64 shards, each under a fiber mutex.  A
 * malformed request gets an error and the connection is closed; a
 * request larger than BUF_MAX too.  The skeleton (acceptor, EMFILE back-off,
 * SIGINT/SIGTERM stop) is server.h.
 */
#include "server.h"

#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>

#define NR_SHARDS 64
#define NR_BUCKETS 4096	  /* per shard */
#define BUF_MAX (1 << 20) /* largest request */
#define MAX_ARGS 64

struct ent {
	struct ent *next;
	size_t klen, vlen;
	char *val;
	char key[];
};

static struct shard {
	fiber_mutex_t lock;
	struct ent *b[NR_BUCKETS];
} shards[NR_SHARDS];

struct arg {
	const char *p;
	size_t n;
};

struct out {
	char *p;
	size_t len, cap;
	bool oom; /* a reply was lost: the connection must end */
};

#define OUT_FLUSH 65536 /* write replies out once this much is pending */
#define OOM "-OOM out of memory\r\n"

/* The hash's starting state, drawn at start: keys that collide under one
 * seed (FNV-1a's, which anyone can search offline) land apart under
 * another, so a client cannot pile its keys into one chain. */
static uint64_t hash_seed;

static uint64_t hash(const char *p, size_t n)
{
	uint64_t h = hash_seed; /* FNV-1a from a secret offset */

	while (n--)
		h = (h ^ (unsigned char)*p++) * 1099511628211ull;
	return h ^ (h >> 29);
}

/* find - the slot holding @k's entry (or the empty one at the chain's
 * end) in its locked shard. */
static struct ent **find(struct shard *s, uint64_t h, const struct arg *k)
{
	struct ent **e = &s->b[(h / NR_SHARDS) % NR_BUCKETS];

	while (*e && ((*e)->klen != k->n || memcmp((*e)->key, k->p, k->n)))
		e = &(*e)->next;
	return e;
}

static void put(struct out *o, const void *p, size_t n)
{
	if (o->oom)
		return;
	if (o->len + n > o->cap) {
		size_t cap = (o->len + n) * 2;
		char *q = realloc(o->p, cap);

		if (!q) {
			o->oom = true;
			return;
		}
		o->p = q;
		o->cap = cap;
	}
	memcpy(o->p + o->len, p, n);
	o->len += n;
}

/* putn - "@c<v>\r\n": an integer reply or a bulk header. */
static void putn(struct out *o, char c, long long v)
{
	char b[32];

	put(o, b, (size_t)snprintf(b, sizeof(b), "%c%lld\r\n", c, v));
}

static bool is(const struct arg *a, const char *name)
{
	return a->n == strlen(name) && !strncasecmp(a->p, name, a->n);
}

/* incr - @e's value + 1 in *@res; false if it is no integer. */
static bool incr(struct ent *e, long long *res)
{
	char b[32], *end;
	long long v;

	if (e->vlen == 0 || e->vlen >= sizeof(b))
		return false;
	memcpy(b, e->val, e->vlen);
	b[e->vlen] = 0;
	errno = 0;
	v = strtoll(b, &end, 10);
	if (*end || errno || v == LLONG_MAX)
		return false;
	*res = v + 1;
	return true;
}

/* create - a new empty entry for @k, or NULL without memory. */
static struct ent *create(const struct arg *k)
{
	struct ent *e = calloc(1, sizeof(*e) + k->n);

	if (e) {
		memcpy(e->key, k->p, k->n);
		e->klen = k->n;
	}
	return e;
}

/* run - one command on the store, its answer appended to @o. */
static void run(struct arg *a, int n, struct out *o)
{
	uint64_t h = n > 1 ? hash(a[1].p, a[1].n) : 0;
	struct shard *s = &shards[h % NR_SHARDS];
	struct ent **slot, *e;
	long long v;
	int del = 0;

	if (is(&a[0], "PING") && n <= 2) {
		if (n == 1)
			put(o, "+PONG\r\n", 7);
		else {
			putn(o, '$', (long long)a[1].n);
			put(o, a[1].p, a[1].n);
			put(o, "\r\n", 2);
		}
	} else if (is(&a[0], "GET") && n == 2) {
		fiber_mutex_lock(&s->lock);
		e = *find(s, h, &a[1]);
		if (!e)
			put(o, "$-1\r\n", 5);
		else {
			putn(o, '$', (long long)e->vlen);
			put(o, e->val, e->vlen);
			put(o, "\r\n", 2);
		}
		fiber_mutex_unlock(&s->lock);
	} else if (is(&a[0], "SET") && n == 3) {
		char *val = malloc(a[2].n + 1);

		if (val)
			memcpy(val, a[2].p, a[2].n);
		fiber_mutex_lock(&s->lock);
		slot = find(s, h, &a[1]);
		if (val && (*slot || (*slot = create(&a[1])))) {
			free((*slot)->val);
			(*slot)->val = val;
			(*slot)->vlen = a[2].n;
			val = NULL;
			put(o, "+OK\r\n", 5);
		} else {
			put(o, OOM, strlen(OOM));
		}
		fiber_mutex_unlock(&s->lock);
		free(val);
	} else if (is(&a[0], "DEL") && n >= 2) {
		for (int i = 1; i < n; i++) {
			h = hash(a[i].p, a[i].n);
			s = &shards[h % NR_SHARDS];
			fiber_mutex_lock(&s->lock);
			slot = find(s, h, &a[i]);
			if ((e = *slot)) {
				*slot = e->next;
				free(e->val);
				free(e);
				del++;
			}
			fiber_mutex_unlock(&s->lock);
		}
		putn(o, ':', del);
	} else if (is(&a[0], "INCR") && n == 2) {
		char *val = malloc(32);

		fiber_mutex_lock(&s->lock);
		slot = find(s, h, &a[1]);
		if (!val || (!*slot && !(*slot = create(&a[1])))) {
			put(o, OOM, strlen(OOM));
		} else if (!(*slot)->val ? (v = 1, true) : incr(*slot, &v)) {
			free((*slot)->val);
			(*slot)->val = val;
			(*slot)->vlen = (size_t)snprintf(val, 32, "%lld", v);
			val = NULL;
			putn(o, ':', v);
		} else {
			put(o,
			    "-ERR value is not an integer or out of range\r\n",
			    46);
		}
		fiber_mutex_unlock(&s->lock);
		free(val);
	} else if (is(&a[0], "CONFIG") && n == 3) { /* GET x: "x" is "" */
		put(o, "*2\r\n", 4);
		putn(o, '$', (long long)a[2].n);
		put(o, a[2].p, a[2].n);
		put(o, "\r\n$0\r\n\r\n", 8);
	} else if (is(&a[0], "COMMAND")) {
		put(o, "*0\r\n", 4);
	} else {
		put(o, "-ERR unknown command or wrong arguments\r\n", 41);
	}
}

/* number - the decimal at @p ending in CRLF before @end.
 * Return: bytes used with the CRLF, 0 if incomplete, -1 if malformed. */
static long number(const char *p, const char *end, long max, long *v)
{
	const char *q = p;

	*v = 0;
	for (; q < end && *q >= '0' && *q <= '9'; q++)
		if ((*v = *v * 10 + (*q - '0')) > max)
			return -1;
	if (end - q < 2)
		return 0;
	return q > p && q[0] == '\r' && q[1] == '\n' ? q + 2 - p : -1;
}

/* parse - one command from @p..@end into @a: "*N\r\n$L\r\n...\r\n", or
 * an inline line "PING\r\n".  Return: bytes used, 0 if incomplete, -1 if
 * malformed; *@n the argument count. */
static long parse(const char *p, const char *end, struct arg *a, int *n)
{
	const char *q = p, *nl;
	long count, len, used;

	if (*p != '*') {
		nl = memchr(p, '\n', (size_t)(end - p));
		if (!nl)
			return 0;
		for (*n = 0, q = p; q < nl && *n < MAX_ARGS;) {
			while (q < nl && (*q == ' ' || *q == '\r'))
				q++;
			a[*n].p = q;
			while (q < nl && *q != ' ' && *q != '\r')
				q++;
			a[*n].n = (size_t)(q - a[*n].p);
			*n += a[*n].n > 0;
		}
		return *n ? nl + 1 - p : -1;
	}
	used = number(++q, end, MAX_ARGS, &count);
	if (used <= 0) /* a frame may be cut anywhere, even after '*' */
		return used;
	if (count == 0)
		return -1;
	for (q += used, *n = 0; *n < count; (*n)++) {
		if (q >= end)
			return 0;
		if (*q != '$')
			return -1;
		used = number(++q, end, BUF_MAX, &len);
		if (used <= 0)
			return used;
		q += used;
		if (end - q < len + 2)
			return 0;
		if (q[len] != '\r' || q[len + 1] != '\n')
			return -1;
		a[*n] = (struct arg){ q, (size_t)len };
		q += len + 2;
	}
	return q - p;
}

static void *serve(void *arg)
{
	int fd = (int)(long)arg, one = 1, n;
	struct out o = { 0 };
	struct arg a[MAX_ARGS];
	size_t have = 0, cap = 16384;
	char *buf = malloc(cap);
	long used = 0;
	ssize_t r;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	while (buf && (r = fiber_read(fd, buf + have, cap - have)) > 0) {
		size_t off = 0;

		have += (size_t)r;
		o.len = 0;
		while (off < have &&
		       (used = parse(buf + off, buf + have, a, &n)) > 0) {
			off += (size_t)used;
			if (is(&a[0], "QUIT")) {
				put(&o, "+OK\r\n", 5);
				fiber_write(fd, o.p, o.len);
				goto out;
			}
			run(a, n, &o);
			if (o.oom)
				goto out;
			if (o.len >=
			    OUT_FLUSH) { /* bound a pipeline's replies */
				if (fiber_write(fd, o.p, o.len) !=
				    (ssize_t)o.len)
					goto out;
				o.len = 0;
			}
		}
		if (used < 0)
			put(&o, "-ERR Protocol error\r\n", 21);
		if (o.oom)
			break;
		if (o.len && fiber_write(fd, o.p, o.len) != (ssize_t)o.len)
			break;
		if (used < 0)
			break;
		memmove(buf, buf + off, have - off);
		have -= off;
		if (have == cap) { /* grow, up to BUF_MAX */
			char *more = cap < BUF_MAX ? realloc(buf, cap * 2) : 0;

			if (!more)
				break;
			buf = more;
			cap *= 2;
		}
	}
out:
	free(o.p);
	free(buf);
	conn_close(fd);
	return NULL;
}

int main(int argc, char **argv)
{
	if (getrandom(&hash_seed, sizeof(hash_seed), 0) != sizeof(hash_seed))
		hash_seed = (uint64_t)time(NULL) * 0x9e3779b97f4a7c15ull;
	hash_seed ^= 1469598103934665603ull;
	return server_main(argc, argv, "kv", serve);
}
