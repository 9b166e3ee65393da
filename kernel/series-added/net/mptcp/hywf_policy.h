/* SPDX-License-Identifier: GPL-2.0 */
/*
 * HyWF decision core: pure integer logic shared by the kernel scheduler
 * (sched_hywf.c) and braid's userspace test harness.
 *
 * It includes no headers: the includer provides u8/u32/u64 and bool. All
 * randomness comes through struct hywf_rand so that the harness can replay a
 * fixed seed and check the distributions statistically.
 *
 * Split weights are fixed point with HYWF_ONE == 1.0. For two paths the
 * weight of the first path is p ~ U[c - h, c + h] with c = ps and
 * h = min(c, 1 - c): for ps <= 0.5 that is HyWF's U[0, 2 * ps], the biased
 * split that favours a cheap second network; ps = 0.5 gives U[0, 1]. For
 * three or more paths the weights are uniform on the simplex (spacings of
 * sorted uniforms) and ps is not used.
 *
 * Burst lengths are geometric with mean ncons packets and support >= 1:
 * each further packet continues the burst with probability q = 1 - 1/ncons.
 * They are drawn in one step by inversion, L = 1 + floor(log U / log q),
 * with base-2 logarithms in fixed point (HYWF_LOG_SHIFT fractional bits),
 * so a burst costs the same whatever ncons is.
 *
 * A split belongs to an epoch (struct hywf_epoch): one page load. The
 * epoch may be one connection's or shared by all connections to one peer
 * or in one namespace (the kernel file decides). So do its bursts: the
 * connections sending at once take the page's current burst in pieces
 * (hywf_take_burst()).
 *
 * Optionally (nchp > 0, two paths) a connection's split drifts around its
 * epoch's, HyWF-AP's dynamic p: see hywf_drift_weights().
 */
#ifndef __MPTCP_HYWF_POLICY_H
#define __MPTCP_HYWF_POLICY_H

#define HYWF_ONE_SHIFT		16
#define HYWF_ONE		0x10000U	/* 1.0, i.e. 1 << HYWF_ONE_SHIFT */
#define HYWF_PERMILLE		1000U
#define HYWF_MAX_PATHS		8
/* A page's burst is handed out in pieces of ncons / HYWF_PIECE_DIV packets. */
#define HYWF_PIECE_DIV		4
/* Bound on a burst, in units of ncons: keeps every product in range. */
#define HYWF_BURST_MAX_FACTOR	64
/* fractional bits of the fixed-point base-2 logarithms */
#define HYWF_LOG_SHIFT		30

#ifndef hywf_div_u64
#define hywf_div_u64(a, b)	((a) / (b))
#endif

/**
 * struct hywf_rand - injectable source of uniform 32-bit random numbers
 * @next: returns the next random value
 * @ctx: opaque state passed to @next
 */
struct hywf_rand {
	u32 (*next)(void *ctx);
	void *ctx;
};

/**
 * struct hywf_params - tunables, validated by the sysctl layer
 * @ps_permille: centre of the first path's split range, 0..1000
 * @ncons: mean burst length in packets, >= 1
 * @nchp: mean packets between redraws of a drifting split, 0 for none
 */
struct hywf_params {
	u32 ps_permille;
	u32 ncons;
	u32 nchp;
};

/* Uniform integer in [lo, hi] from one 32-bit draw (multiply-shift). */
static inline u32 hywf_uniform(u32 r, u32 lo, u32 hi)
{
	return lo + (u32)(((u64)r * ((u64)hi - lo + 1)) >> 32);
}

/* A weight drawn on U[c - h, c + h] with h = min(c, 1 - c): around @c and
 * inside [0, 1].
 */
static inline u32 hywf_draw_around(u32 c, u32 r)
{
	u32 h = c < HYWF_ONE - c ? c : HYWF_ONE - c;

	return hywf_uniform(r, c - h, c + h);
}

/* First path's weight for two paths: U[c - h, c + h], see file comment. */
static inline u32 hywf_draw_two(u32 ps_permille, u32 r)
{
	/* in 32 bits: ps_permille <= HYWF_PERMILLE, and 1000 << 16 < 2^32;
	 * a u64 division would need div_u64() on 32-bit kernels
	 */
	return hywf_draw_around((ps_permille << HYWF_ONE_SHIFT) / HYWF_PERMILLE,
				r);
}

/*
 * Weights uniform on the simplex: the spacings of n - 1 sorted uniforms on
 * [0, HYWF_ONE]. Insertion sort is fine for at most HYWF_MAX_PATHS points.
 */
static inline void hywf_draw_simplex(u32 n, struct hywf_rand *rnd, u32 *weight)
{
	u32 cut[HYWF_MAX_PATHS + 1];
	u32 i, j, v;

	cut[0] = 0;
	for (i = 1; i < n; i++) {
		v = hywf_uniform(rnd->next(rnd->ctx), 0, HYWF_ONE);
		for (j = i; j > 1 && cut[j - 1] > v; j--)
			cut[j] = cut[j - 1];
		cut[j] = v;
	}
	cut[n] = HYWF_ONE;
	for (i = 0; i < n; i++)
		weight[i] = cut[i + 1] - cut[i];
}

/**
 * hywf_draw_weights - draw a new split for a page load
 * @p: parameters
 * @n: number of paths, 1..HYWF_MAX_PATHS
 * @rnd: random source
 * @weight: out, @n weights summing to HYWF_ONE
 */
static inline void hywf_draw_weights(const struct hywf_params *p, u32 n,
				     struct hywf_rand *rnd, u32 *weight)
{
	if (n <= 1) {
		weight[0] = HYWF_ONE;
	} else if (n == 2) {
		weight[0] = hywf_draw_two(p->ps_permille, rnd->next(rnd->ctx));
		weight[1] = HYWF_ONE - weight[0];
	} else {
		hywf_draw_simplex(n, rnd, weight);
	}
}

/**
 * hywf_pick_path - choose the path of the next burst
 * @weight: split weights, at least @n of them
 * @n: number of paths
 * @r: one uniform 32-bit draw
 *
 * The first @n weights are used in proportion to each other: a connection
 * with fewer paths than its epoch was drawn for picks among its own paths
 * as the epoch's split weighs them.
 *
 * Return: index of the path, in [0, @n).
 */
static inline u32 hywf_pick_path(const u32 *weight, u32 n, u32 r)
{
	u32 i, x, acc = 0, sum = 0;

	for (i = 0; i < n; i++)
		sum += weight[i];
	x = (u32)(((u64)r * sum) >> 32);
	for (i = 0; i + 1 < n; i++) {
		acc += weight[i];
		if (x < acc)
			return i;
	}
	return n - 1;
}

/*
 * log2(@x) for 1 <= @x < 2^34, in units of 2^-HYWF_LOG_SHIFT: the integer
 * part from the top bit, then one fractional bit per squaring of the
 * mantissa (kept in [2^31, 2^32), so that its square fits 64 bits).
 */
static inline u64 hywf_log2(u64 x)
{
	u32 msb = 63 - __builtin_clzll(x);
	u64 res = (u64)msb << HYWF_LOG_SHIFT;
	u64 m = msb >= 31 ? x >> (msb - 31) : x << (31 - msb);
	int bit;

	for (bit = HYWF_LOG_SHIFT - 1; bit >= 0; bit--) {
		m = (m * m) >> 31;
		if (m >= (1ULL << 32)) {
			m >>= 1;
			res |= 1ULL << bit;
		}
	}
	return res;
}

/**
 * hywf_draw_burst - length of the next burst, in packets
 * @ncons: mean burst length, >= 1
 * @r: one uniform 32-bit draw
 *
 * Geometric with mean @ncons by inversion: with U = (@r + 1) / 2^32 in
 * (0, 1] and q = 1 - 1/@ncons, L = 1 + floor(log2 U / log2 q), so that
 * P(L > k) = P(U <= q^k) = q^k. U's 32 bits end the tail near 22 @ncons
 * (P = 2^-32); HYWF_BURST_MAX_FACTOR * @ncons bounds it whatever happens.
 */
static inline u32 hywf_draw_burst(u32 ncons, u32 r)
{
	u64 minus_log_u, minus_log_q, extra;

	if (ncons <= 1)
		return 1;
	minus_log_u = (32ULL << HYWF_LOG_SHIFT) - hywf_log2((u64)r + 1);
	minus_log_q = hywf_log2(ncons) - hywf_log2(ncons - 1);
	extra = hywf_div_u64(minus_log_u, minus_log_q);
	if (extra >= (u64)ncons * HYWF_BURST_MAX_FACTOR)
		return ncons * HYWF_BURST_MAX_FACTOR;
	return 1 + (u32)extra;
}

/**
 * hywf_idle_expired - has the epoch been idle long enough to redraw?
 * @now_ms: current time, wrapping milliseconds
 * @last_ms: time of the last scheduling decision
 * @idle_ms: threshold
 *
 * A long-lived connection (Tor, HTTP keep-alive) carries many page loads;
 * one split for all of them would let an observer learn it. A pause longer
 * than @idle_ms is taken as the start of a new page load.
 */
static inline bool hywf_idle_expired(u32 now_ms, u32 last_ms, u32 idle_ms)
{
	return (u32)(now_ms - last_ms) > idle_ms;
}

/**
 * struct hywf_epoch - the split of one page load
 * @weight: one weight per path, summing to HYWF_ONE
 * @last_ms: time of the last burst decision in the epoch, for idle detection
 * @draws: number of splits drawn so far (observable by tests)
 * @burst_left: packets of the page's current burst not yet handed out
 * @burst_seq: names the page's current burst, never 0: a piece given back
 *	(hywf_give_back()) must be of the burst still under way
 * @nr_paths: number of paths @weight was drawn for; 0 before the first draw
 * @burst_path: the path of the page's current burst
 */
struct hywf_epoch {
	u32 weight[HYWF_MAX_PATHS];
	u32 last_ms;
	u32 draws;
	u32 burst_left;
	u32 burst_seq;
	u8 nr_paths;
	u8 burst_path;
};

/**
 * struct hywf_drift - a connection's split drifting around its epoch's
 * @weight: the two paths' current weights
 * @left: packets until the next redraw
 * @epoch_draws: the epoch's @draws when @weight was drawn
 * @draws: redraws so far (observable by tests)
 */
struct hywf_drift {
	u32 weight[2];
	u32 left;
	u32 epoch_draws;
	u32 draws;
};

/**
 * hywf_drift_weights - the weights the next burst's path is picked with
 * @e: the epoch
 * @p: parameters
 * @n: number of paths
 * @d: the connection's drift, or NULL
 * @rnd: random source
 *
 * HyWF-AP's dynamic p (the thesis's section 6.7): the page's split c is
 * drawn as usual, and the connection's split is redrawn on U[c - h, c + h]
 * (h = min(c, 1 - c)) after a geometric number of packets of mean
 * @p->nchp, and whenever the epoch draws a new split. The mean stays the
 * page's c while the split a classifier sees moves within the page. The
 * redraw is checked at each burst, so a redraw comes at the first burst
 * after its packets have gone. Two paths only, in an epoch drawn for two;
 * otherwise the epoch's weights are used as they are.
 *
 * Return: @n weights summing to HYWF_ONE.
 */
static inline const u32 *hywf_drift_weights(const struct hywf_epoch *e,
					    const struct hywf_params *p, u32 n,
					    struct hywf_drift *d,
					    struct hywf_rand *rnd)
{
	if (!d || !p->nchp || n != 2 || e->nr_paths != 2)
		return e->weight;
	if (d->epoch_draws != e->draws || !d->left) {
		d->weight[0] = hywf_draw_around(e->weight[0],
						rnd->next(rnd->ctx));
		d->weight[1] = HYWF_ONE - d->weight[0];
		d->left = hywf_draw_burst(p->nchp, rnd->next(rnd->ctx));
		d->epoch_draws = e->draws;
		d->draws++;
	}
	return d->weight;
}

/**
 * hywf_keep_burst - may the current burst go on?
 * @last_ms: the connection's last decision, updated when the burst goes on
 * @present: the burst's subflow is still usable
 * @waiting: the burst is waiting for its subflow to take data
 * @drawn_paths: number of usable paths when the burst was drawn
 * @n: number of usable paths now
 * @segs_left: what is left of the burst, in segments
 * @now_ms: current time, wrapping milliseconds
 * @idle_ms: idle gap that starts a new page load
 *
 * A burst goes on while it has segments left, its subflow is still there
 * and no path has come since it was drawn: a burst drawn on the only
 * subflow of a connection that was waiting for its join ends with the
 * join, so that the rest of its first flight follows the split instead of
 * the first path. An idle gap ends a burst even with segments left, so
 * that the next page load starts with a new split rather than the tail of
 * the previous one; a burst waiting for a full subflow is busy, not idle
 * (the wait may last longer than @idle_ms, and its end is the
 * scheduler's, counted, not a new page).
 *
 * Return: true if the burst goes on.
 */
static inline bool hywf_keep_burst(u32 *last_ms, bool present, bool waiting,
				   u32 drawn_paths, u32 n, int segs_left,
				   u32 now_ms, u32 idle_ms)
{
	if (segs_left <= 0 || !present || n > drawn_paths ||
	    (!waiting && hywf_idle_expired(now_ms, *last_ms, idle_ms)))
		return false;
	*last_ms = now_ms;
	return true;
}

/**
 * hywf_epoch_touch_due - should a busy connection refresh its epoch now?
 * @touched_ms: when it last did, or drew a burst; updated when due
 * @now_ms: current time, wrapping milliseconds
 * @idle_ms: idle gap that starts a new page load
 *
 * A page's split lives while any of its multipath connections sends. A
 * burst that lasts longer than @idle_ms (a long one at a slow path's rate)
 * draws nothing, so without a refresh the epoch would expire under it and
 * the page's next burst on another connection would redraw the split in
 * the middle of the page. The shared epoch is behind a lock: a connection
 * refreshes it at most four times per idle gap.
 *
 * Return: true if the caller should hywf_epoch_touch() its epoch now.
 */
static inline bool hywf_epoch_touch_due(u32 *touched_ms, u32 now_ms,
					u32 idle_ms)
{
	if ((u32)(now_ms - *touched_ms) < idle_ms / 4)
		return false;
	*touched_ms = now_ms;
	return true;
}

/**
 * hywf_epoch_touch - a connection with @n paths is busy with a burst
 * @e: its epoch
 * @n: its number of usable paths
 * @now_ms: current time, wrapping milliseconds
 * @idle_ms: idle gap that starts a new page load
 *
 * Keeps @e's split alive, as a burst decision would. A connection with a
 * single path does not (hywf_next_burst()), nor does one whose epoch has
 * already expired: its burst must not hand that split to the next page.
 */
static inline void hywf_epoch_touch(struct hywf_epoch *e, u32 n, u32 now_ms,
				    u32 idle_ms)
{
	if (n >= 2 && e->nr_paths &&
	    !hywf_idle_expired(now_ms, e->last_ms, idle_ms))
		e->last_ms = now_ms;
}

/**
 * hywf_next_burst - decide the path and length of the next burst
 * @e: the epoch the connection belongs to
 * @p: parameters
 * @n: number of usable paths of the connection now, >= 1
 * @now_ms: current time, wrapping milliseconds
 * @idle_ms: idle gap that starts a new page load
 * @d: the connection's drifting split (hywf_drift_weights()), or NULL
 * @rnd: random source
 * @burst_pkts: out, length of the burst in packets
 *
 * A new split is drawn on the first burst with two paths or more, after an
 * idle gap of the epoch's multipath connections (a new page load) and
 * when a connection has more paths than the split was drawn for (a network
 * came). Only connections with two paths or more touch the epoch: one with
 * fewer paths than the split picks among its own paths in the split's
 * proportions, and one with a single path (waiting for its join) neither
 * redraws the split nor keeps it alive, so that it cannot hand one page's
 * split to the next. Its bursts are on its only path, path 0.
 *
 * Return: index of the path for the burst, in [0, @n).
 */
static inline u32 hywf_next_burst(struct hywf_epoch *e,
				  const struct hywf_params *p, u32 n,
				  u32 now_ms, u32 idle_ms,
				  struct hywf_drift *d,
				  struct hywf_rand *rnd, u32 *burst_pkts)
{
	u32 path = 0;

	if (n > HYWF_MAX_PATHS)
		n = HYWF_MAX_PATHS;
	if (n >= 2) {
		if (n > e->nr_paths ||
		    hywf_idle_expired(now_ms, e->last_ms, idle_ms)) {
			hywf_draw_weights(p, n, rnd, e->weight);
			e->nr_paths = n;
			e->draws++;
		}
		path = hywf_pick_path(hywf_drift_weights(e, p, n, d, rnd), n,
				      rnd->next(rnd->ctx));
		e->last_ms = now_ms;
	}
	*burst_pkts = hywf_draw_burst(p->ncons, rnd->next(rnd->ctx));
	if (d && d->left)
		d->left -= *burst_pkts < d->left ? *burst_pkts : d->left;
	return path;
}

/**
 * hywf_take_burst - the next piece of the page's burst for one connection
 * @e: the epoch the connection belongs to
 * @p: parameters
 * @n: number of usable paths of the connection now, >= 1
 * @now_ms: current time, wrapping milliseconds
 * @idle_ms: idle gap that starts a new page load
 * @d: the connection's drifting split (hywf_drift_weights()), or NULL
 * @rnd: random source
 * @burst_pkts: out, length of the piece in packets
 * @piece_seq: out, the page's burst the piece is of (@e's @burst_seq), 0
 *	for a burst of the connection's own, which is never given back
 *
 * HyWF's bursts belong to the page, as its split does. Were each of a
 * page's connections to draw bursts of its own, the connections sending
 * at once would interleave their bursts on both networks: each observer
 * would see the whole page thinned, in runs a few packets long, and a
 * thinned copy of a page is nearly as recognisable as the page itself.
 * So the epoch holds the page's current burst (its path and the packets
 * left of its length), and a connection takes it in pieces of at most
 * ncons / HYWF_PIECE_DIV packets: connections sending at once take
 * successive pieces of one burst, on one path, and the page moves to its
 * next burst when the pieces handed out add up to the burst's length. A
 * connection that runs out of data before its piece does gives the rest
 * back (hywf_give_back()): a page of small objects, each a piece's first
 * packets, still crosses a network in runs of ncons on average.
 *
 * A connection with fewer paths than the split (one not yet joined)
 * numbers the paths differently, and one with a single path is outside
 * the split (hywf_next_burst()): they draw bursts of their own and leave
 * the page's alone.
 *
 * Return: index of the path for the piece, in [0, @n).
 */
static inline u32 hywf_take_burst(struct hywf_epoch *e,
				  const struct hywf_params *p, u32 n,
				  u32 now_ms, u32 idle_ms,
				  struct hywf_drift *d,
				  struct hywf_rand *rnd, u32 *burst_pkts,
				  u32 *piece_seq)
{
	u32 piece = p->ncons / HYWF_PIECE_DIV;
	u32 path, len;

	if (n > HYWF_MAX_PATHS)
		n = HYWF_MAX_PATHS;
	if (n >= 2 && n == e->nr_paths && e->burst_left &&
	    !hywf_idle_expired(now_ms, e->last_ms, idle_ms)) {
		path = e->burst_path;
		e->last_ms = now_ms;
	} else {
		path = hywf_next_burst(e, p, n, now_ms, idle_ms, d, rnd, &len);
		if (n < 2 || n != e->nr_paths) {
			*burst_pkts = len;
			*piece_seq = 0;
			return path;
		}
		e->burst_path = path;
		e->burst_left = len;
		if (!++e->burst_seq)
			e->burst_seq = 1;
	}
	if (!piece)
		piece = 1;
	*burst_pkts = e->burst_left < piece ? e->burst_left : piece;
	e->burst_left -= *burst_pkts;
	*piece_seq = e->burst_seq;
	return path;
}

/**
 * hywf_piece_current - whether a piece's burst is still the page's own
 * @e: the epoch the piece came from
 * @n: number of usable paths of the connection when it took the piece
 * @piece_seq: the piece's burst, from hywf_take_burst()
 * @now_ms: current time, wrapping milliseconds
 * @idle_ms: idle gap that starts a new page load
 *
 * A piece of a burst of the connection's own (@piece_seq 0), of a burst
 * the page has moved on from, of a split over a different number of
 * paths, or of a page gone idle is not.
 */
static inline bool hywf_piece_current(const struct hywf_epoch *e, u32 n,
				      u32 piece_seq, u32 now_ms, u32 idle_ms)
{
	return piece_seq && piece_seq == e->burst_seq && n == e->nr_paths &&
	       !hywf_idle_expired(now_ms, e->last_ms, idle_ms);
}

/**
 * hywf_give_back - a connection ran out of data with part of its piece left
 * @e: the epoch the piece came from
 * @n: number of usable paths of the connection when it took the piece
 * @piece_seq: the piece's burst, from hywf_take_burst()
 * @pkts: packets of the piece not sent
 * @now_ms: current time, wrapping milliseconds
 * @idle_ms: idle gap that starts a new page load
 *
 * The rest of the piece goes back to the page's burst if that burst is
 * still the page's current one: the next connection to send takes it, on
 * the same path. Once the page has moved on to its next burst (another
 * connection took the last piece and then found the burst spent), or
 * gone idle, the rest is dropped: it must not lengthen a burst it is not
 * part of, nor revive a page that is over.
 *
 * Return: true if the packets went back to the page's burst.
 */
static inline bool hywf_give_back(struct hywf_epoch *e, u32 n, u32 piece_seq,
				  u32 pkts, u32 now_ms, u32 idle_ms)
{
	if (!hywf_piece_current(e, n, piece_seq, now_ms, idle_ms))
		return false;
	e->burst_left += pkts;
	return true;
}

/**
 * hywf_take_back - a connection that gave packets back sends again
 * @e: the epoch it gave them to
 * @n: number of usable paths of the connection when it took the piece
 * @piece_seq: the piece's burst, from hywf_take_burst()
 * @pkts: packets it gave back (hywf_give_back())
 * @now_ms: current time, wrapping milliseconds
 * @idle_ms: idle gap that starts a new page load
 *
 * A sender whose queue ran dry between two writes gives back the rest of
 * its piece and then has data again at once: it goes on with what no
 * other connection has taken meanwhile, as if it had kept it.
 *
 * Return: the packets taken back, at most @pkts; 0 once the page has
 * moved on to its next burst or gone idle.
 */
static inline u32 hywf_take_back(struct hywf_epoch *e, u32 n, u32 piece_seq,
				 u32 pkts, u32 now_ms, u32 idle_ms)
{
	if (!hywf_piece_current(e, n, piece_seq, now_ms, idle_ms))
		return 0;
	if (pkts > e->burst_left)
		pkts = e->burst_left;
	e->burst_left -= pkts;
	e->last_ms = now_ms;
	return pkts;
}

#endif /* __MPTCP_HYWF_POLICY_H */
