/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Latency-optimal Bernoulli split, decision core: pure integer logic shared
 * by the kernel scheduler (sched_bernoulli.c) and braid's userspace test
 * harness. It includes no headers: the includer provides u8/u32/u64.
 *
 * Model (Henri's thesis, ch. 5): each packet goes to path i with
 * probability lambda_i / lambda, independently, and path i is an M/M/1
 * queue of service rate mu_i fed at rate lambda_i. The mean delay
 *
 *   D = sum_i lambda_i / (mu_i - lambda_i) / lambda
 *
 * is convex in the split; its minimum under sum_i lambda_i = lambda puts
 * the same marginal delay mu_i / (mu_i - lambda_i)^2 on every path that
 * carries load ("water-filling"):
 *
 *   lambda_i = mu_i - sqrt(mu_i) * (sum_A mu_j - lambda) / sum_A sqrt(mu_j)
 *
 * over the active set A of the fastest paths for which this is positive.
 * Below lambda0 = mu_1 - sqrt(mu_1 mu_2) (fastest two paths) that set is
 * the fastest path alone: a second path would add more delay than it
 * takes away. For two paths the formula is the thesis's closed form (5.8)
 * for p* = lambda_1 / lambda. At or above the total capacity no split is
 * stable and the split is capacity-proportional (p_lim = mu_1 / sum mu).
 *
 * Rates are in any one unit (braid uses bytes per second). Square roots
 * are taken of mu << BERN_SQRT_SHIFT so that they keep 8 more bits; they
 * cancel in the ratio. Weights are fixed point, BERN_ONE == 1.0.
 */
#ifndef __MPTCP_BERNOULLI_POLICY_H
#define __MPTCP_BERNOULLI_POLICY_H

#define BERN_ONE_SHIFT		16
#define BERN_ONE		0x10000U	/* 1.0 */
#define BERN_MAX_PATHS		8
#define BERN_SQRT_SHIFT		16
/* rates above this (bytes/s: 137 Gbit/s) are clamped: keeps products in range */
#define BERN_RATE_MAX		0x400000000ULL	/* 2^34 */

#ifndef bern_div_u64
#define bern_div_u64(a, b)	((a) / (b))
#endif

/* floor(sqrt(@x)), bit by bit. */
static inline u64 bern_isqrt(u64 x)
{
	u64 res = 0, bit = 1ULL << 62;

	while (bit > x)
		bit >>= 2;
	while (bit) {
		if (x >= res + bit) {
			x -= res + bit;
			res = (res >> 1) + bit;
		} else {
			res >>= 1;
		}
		bit >>= 2;
	}
	return res;
}

/* Weights proportional to @v (@n entries, sum @total > 0), summing to
 * BERN_ONE exactly: the rounding remainder goes to the largest.
 */
static inline void bern_proportional(const u64 *v, u32 n, u64 total,
				     u32 *weight)
{
	u32 i, big = 0, sum = 0;

	for (i = 0; i < n; i++) {
		weight[i] = (u32)bern_div_u64(v[i] << BERN_ONE_SHIFT, total);
		sum += weight[i];
		if (v[i] > v[big])
			big = i;
	}
	weight[big] += BERN_ONE - sum;
}

/**
 * bern_optimal_weights - the split that minimises mean delay
 * @mu: service rate of each path, > 0 (clamped to BERN_RATE_MAX)
 * @n: number of paths, 1..BERN_MAX_PATHS
 * @lambda: offered load, in @mu's unit; 0: unknown, use the fastest path
 * @weight: out, @n weights summing to BERN_ONE
 *
 * Return: how many paths carry load.
 */
static inline u32 bern_optimal_weights(const u64 *mu, u32 n, u64 lambda,
				       u32 *weight)
{
	u64 m[BERN_MAX_PATHS], root[BERN_MAX_PATHS], share[BERN_MAX_PATHS];
	u32 order[BERN_MAX_PATHS];
	u64 total = 0, sum_mu, sum_root, excess, cut;
	u32 i, j, k, used;

	if (n > BERN_MAX_PATHS)
		n = BERN_MAX_PATHS;
	for (i = 0; i < n; i++) {
		m[i] = mu[i] ? (mu[i] < BERN_RATE_MAX ? mu[i] : BERN_RATE_MAX) : 1;
		root[i] = bern_isqrt(m[i] << BERN_SQRT_SHIFT);
		total += m[i];
		weight[i] = 0;
		/* insertion sort of path indices, fastest first */
		for (j = i; j > 0 && m[order[j - 1]] < m[i]; j--)
			order[j] = order[j - 1];
		order[j] = i;
	}
	if (lambda >= total) {
		bern_proportional(m, n, total, weight);
		return n;
	}
	if (!lambda) {
		weight[order[0]] = BERN_ONE;
		return 1;
	}

	/* the largest prefix of the fastest paths whose slowest gets load */
	sum_mu = total;
	sum_root = 0;
	for (i = 0; i < n; i++)
		sum_root += root[i];
	for (k = n; k > 1; k--) {
		j = order[k - 1];
		excess = sum_mu - lambda;
		/* lambda_j > 0  <=>  mu_j * sum_root > root_j * excess */
		if (m[j] * sum_root > root[j] * excess)
			break;
		sum_mu -= m[j];
		sum_root -= root[j];
	}
	used = k;
	excess = sum_mu - lambda;
	for (i = 0; i < n; i++)
		share[i] = 0;
	for (i = 0; i < used; i++) {
		j = order[i];
		cut = bern_div_u64(root[j] * excess, sum_root);
		share[j] = m[j] > cut ? m[j] - cut : 0;
	}
	total = 0;
	for (i = 0; i < n; i++)
		total += share[i];
	if (!total) {
		weight[order[0]] = BERN_ONE;
		return 1;
	}
	bern_proportional(share, n, total, weight);
	return used;
}

/**
 * bern_fixed_weights - a fixed split, set by the operator
 * @permille: the first path's share, 0..1000
 * @n: number of paths, 1..BERN_MAX_PATHS
 * @weight: out, @n weights summing to BERN_ONE; the other paths share
 *	    what the first does not take equally
 */
static inline void bern_fixed_weights(u32 permille, u32 n, u32 *weight)
{
	/* in 32 bits (permille <= 1000, 1000 << 16 < 2^32): a u64 division
	 * would need div_u64() on 32-bit kernels
	 */
	u32 first = (permille << BERN_ONE_SHIFT) / 1000;
	u32 i, rest;

	if (n > BERN_MAX_PATHS)
		n = BERN_MAX_PATHS;
	if (n == 1) {
		weight[0] = BERN_ONE;
		return;
	}
	rest = BERN_ONE - first;
	weight[0] = first;
	for (i = 1; i < n; i++)
		weight[i] = rest / (n - 1);
	weight[1] += rest - (rest / (n - 1)) * (n - 1);
}

/**
 * bern_bounded_pick - the drawn path, unless the run would arrive too late
 * @arrival_us: when the run would arrive on each path, microseconds
 * @n: number of paths, 1..BERN_MAX_PATHS
 * @pick: the path drawn from the split
 * @lag_us: how much later than on the earliest path the run may arrive
 *	    on @pick; 0: no bound
 *
 * The model's paths deliver independently. One MPTCP connection delivers
 * in order: every byte sent after a run waits until the run has arrived.
 * A run drawn for a path whose queue makes it arrive long after the
 * earliest path would deliver it holds up everything behind it, on every
 * path (head-of-line blocking, which the model does not have). Bounding
 * that lag keeps the split where the queues allow it and otherwise sends
 * the run where it arrives first.
 *
 * Return: @pick, or the earliest path (the lowest index on a tie) when
 * the run arrives on @pick more than @lag_us after it does there.
 */
static inline u32 bern_bounded_pick(const u64 *arrival_us, u32 n, u32 pick,
				    u32 lag_us)
{
	u32 i, first = 0;

	if (!lag_us)
		return pick;
	for (i = 1; i < n; i++)
		if (arrival_us[i] < arrival_us[first])
			first = i;
	return arrival_us[pick] > arrival_us[first] + lag_us ? first : pick;
}

/**
 * bern_waiting - the bytes a new run waits behind on a path
 * @unacked: bytes sent and not acknowledged, and not yet sent
 * @rate: what the path delivers, bytes per second
 * @owd_us: its one-way propagation delay, microseconds
 *
 * Bytes in flight within one bandwidth-delay product are on the wire, not
 * ahead of the run in a queue: a lightly loaded fast path always has some,
 * and counting them as queue made it look later than an idle slow path
 * and sent runs there below the load where the model keeps every run on
 * the fast path. What is beyond one bandwidth-delay product is queue.
 *
 * Return: @unacked less one bandwidth-delay product, at least 0.
 */
static inline u64 bern_waiting(u64 unacked, u64 rate, u32 owd_us)
{
	u64 bdp = bern_div_u64(rate * 2 * owd_us, 1000000);

	return unacked > bdp ? unacked - bdp : 0;
}

/**
 * bern_ewma - exponentially weighted moving average, gain 2^-@shift
 * @avg: the average so far; 0 starts it at @sample
 * @sample: the new sample
 * @shift: gain exponent
 */
static inline u64 bern_ewma(u64 avg, u64 sample, u32 shift)
{
	if (!avg)
		return sample;
	if (sample >= avg)
		return avg + ((sample - avg) >> shift);
	return avg - ((avg - sample) >> shift);
}

#endif /* __MPTCP_BERNOULLI_POLICY_H */
