// SPDX-License-Identifier: GPL-2.0
/*
 * bernoulli: the latency-optimal random split (Henri, "Improving throughput,
 * latency and privacy with hybrid networks and multipath routing", EPFL
 * thesis 9056, 2018, ch. 5; Henri, Shneer, Thiran, MobiHoc 2018).
 *
 * Each run of segments goes to path i with probability lambda_i / lambda,
 * where lambda is the connection's offered load and the lambda_i minimise
 * the mean delay of M/M/1 queues of the paths' rates (bernoulli_policy.h):
 * below lambda0 = mu_1 - sqrt(mu_1 mu_2) everything takes the fastest path,
 * above it the second path gets a growing share, and near saturation the
 * split is capacity-proportional. In that model (figures computed from
 * the queues' formulas by braid's policy tests, not measured on a wire),
 * on the thesis's example, 30 and 5 Mbit/s at 29 Mbit/s of load, the
 * split's mean delay is 3.1 ms against 3.7 ms with the capacity-
 * proportional split a load-blind scheduler would use; when the slow link
 * varies between 7 and 3 Mbit/s, 9.8 ms against 50 ms (the thesis's
 * optimum there, 3.9 ms, needs the variation's parameters, which a sender
 * cannot observe).
 *
 * One in-order connection adds head-of-line blocking the model does not
 * have: a run on a path with a long queue holds up everything sent after
 * it, on every path. A run drawn for a path on which it would arrive more
 * than bernoulli_max_lag_us after the earliest path goes to the earliest
 * path instead (bern_bounded_pick(); arrival as delaybal estimates it,
 * mptcp_sched_describe_rate(), behind what exceeds one bandwidth-delay
 * product, bern_waiting(); counted in MPTcpExtSchedRunTooLate).
 *
 * Estimators, per connection and per subflow:
 *   mu_i    mptcp_sched_rate(): the largest recent TCP delivery-rate
 *           sample of the subflow (capacity, even when lightly used)
 *   lambda  bytes the application queued on the connection per
 *           BERN_LOAD_INTERVAL_MS, averaged with gain 1/4 (a time
 *           constant of about 0.4 s); after an idle gap of more than
 *           BERN_LOAD_RESTART intervals it starts afresh
 * The split is recomputed for each run from the current estimates.
 *
 * An application that waits for room in the connection's send buffer
 * offers more than the paths carry. The model has no stable split there
 * (its limit is the capacity-proportional one), so while the connection
 * is backlogged each run goes where the queued data leaves first, which
 * keeps every path busy (bern_backlogged(); counted in
 * MPTcpExtSchedBacklogRun). Without this, bulk transfers on paths of
 * unequal delay took up to 13 % longer than under the default scheduler
 * and failed upstream's simult_flows.sh.
 *
 * Runs are geometric with mean bernoulli_batch segments (1: per packet,
 * as in the model; longer runs keep TSO batching at a small cost in
 * delay). Bursts are counted in segments on the wire. When the chosen
 * subflow cannot take data the scheduler waits within the framework's
 * bound (mptcp_sched_wait_for()), then moves the run, counted in
 * MPTcpExtSchedBurstMoved. Backup subflows carry data only when no other
 * subflow is active; retransmissions use the default choice.
 *
 * Paths are numbered by subflow addresses (mptcp_sched_paths()), the same
 * order on every connection. Parameters, per network namespace
 * (net.mptcp.*):
 *   bernoulli_adaptive  1: the optimal split from the estimates (default);
 *                       0: the fixed split below
 *   bernoulli_permille  fixed mode: the first path's share, 0..1000 (500);
 *                       the other paths share the rest equally
 *   bernoulli_batch     mean run length in segments, 1..64 (4)
 *   bernoulli_max_lag_us  adaptive mode: how much later than on the
 *                       earliest path a run may arrive on the path drawn
 *                       for it, microseconds (2000); 0: no bound, the
 *                       split as drawn
 */

#define pr_fmt(fmt) "MPTCP: " fmt

#include <linux/init.h>
#include <linux/jiffies.h>
#include <linux/kernel.h>
#include <linux/random.h>
#include <linux/sysctl.h>
#include <net/net_namespace.h>
#include <net/netns/generic.h>
#include <net/tcp.h>

#include "protocol.h"
#include "mib.h"

#define hywf_div_u64(a, b)	div64_u64(a, b)
#define bern_div_u64(a, b)	div64_u64(a, b)
/* hywf's weighted pick and geometric draw, shared */
#include "hywf_policy.h"
#include "bernoulli_policy.h"
#define dbal_div_u64(a, b)	div64_u64(a, b)
/* the earliest-arrival estimate, shared with delaybal */
#include "delaybal_policy.h"

#define BERN_PERMILLE_DEFAULT	500
#define BERN_BATCH_DEFAULT	4
#define BERN_BATCH_MAX		64
#define BERN_MAX_LAG_US_DEFAULT	2000
#define BERN_MAX_LAG_US_MAX	USEC_PER_SEC
#define BERN_LOAD_INTERVAL_MS	100
#define BERN_LOAD_GAIN_SHIFT	2
#define BERN_LOAD_RESTART	10
#define BERN_BACKLOG_MS		100

/**
 * struct bern_sock - per-connection state, in msk's private area
 * @load: offered load estimate, bytes per second
 * @load_seq: msk->write_seq when @load was last updated
 * @load_ms: when @load was last updated; 0 before the first update
 * @nospace_ms: when the connection was last seen backlogged; 0: never
 * @run: the current run's subflow, and the wait for it
 */
struct bern_sock {
	u64 load;
	u64 load_seq;
	u32 load_ms;
	u32 nospace_ms;
	struct mptcp_sched_burst run;
};

/**
 * struct bern_settings - per-namespace parameters, set through sysctls
 * @adaptive: 1 for the optimal split, 0 for the fixed one
 * @permille: fixed mode's first-path share
 * @batch: mean run length in segments
 * @max_lag_us: adaptive mode's bound on a run's lag behind the earliest path
 */
struct bern_settings {
	u32 adaptive;
	u32 permille;
	u32 batch;
	u32 max_lag_us;
};

/**
 * struct bern_pernet - per-namespace settings and sysctls
 * @cfg: the settings
 * @ctl_hdr: registered sysctl table
 */
struct bern_pernet {
	struct bern_settings cfg;
	struct ctl_table_header *ctl_hdr;
};

static unsigned int bern_net_id __read_mostly;

static struct bern_sock *bern_sk(struct mptcp_sock *msk)
{
	return mptcp_sched_priv(msk);
}

static struct rate_est *bern_rate(struct sock *ssk)
{
	return mptcp_sched_subflow_priv(mptcp_subflow_ctx(ssk));
}

/* Bytes the application queued per second, averaged. */
static u64 bern_update_load(struct mptcp_sock *msk, u32 now)
{
	struct bern_sock *bs = bern_sk(msk);
	u64 seq = READ_ONCE(msk->write_seq);
	u32 elapsed = now - bs->load_ms;
	u64 sample;

	if (!bs->load_ms) {
		bs->load_seq = seq;
		bs->load_ms = now ? : 1;
		return bs->load;
	}
	if (elapsed < BERN_LOAD_INTERVAL_MS)
		return bs->load;

	sample = div_u64((seq - bs->load_seq) * MSEC_PER_SEC, elapsed);
	if (elapsed > BERN_LOAD_RESTART * BERN_LOAD_INTERVAL_MS)
		bs->load = sample;
	else
		bs->load = bern_ewma(bs->load, sample, BERN_LOAD_GAIN_SHIFT);
	bs->load_seq = seq;
	bs->load_ms = now ? : 1;
	return bs->load;
}

/* The application offers at least what the paths carry (lambda >= sum mu)
 * when it has to wait for room in the connection's send buffer: poll()
 * makes it wait above 2/3 of the buffer (sk_stream_min_wspace()), and
 * sendmsg() and poll() set SOCK_NOSPACE when it did. Either seen within
 * the last BERN_BACKLOG_MS marks the connection backlogged. (A connection
 * whose application keeps up has at most its windows' data queued, a
 * third of a buffer that TCP sizes at twice the windows.)
 *
 * No split is stable there, and the model's limit, the capacity-
 * proportional split, is only as good as the rate estimates: a random
 * draw from slightly wrong weights lets one path's queue grow while
 * another runs dry. Sending each run where the queued data leaves first
 * keeps every path busy, which is what that split means on a wire.
 */
static bool bern_backlogged(struct mptcp_sock *msk, u32 now)
{
	struct sock *sk = (struct sock *)msk;
	struct socket *sock = READ_ONCE(sk->sk_socket);
	struct bern_sock *bs = bern_sk(msk);

	if ((sock && test_bit(SOCK_NOSPACE, &sock->flags)) ||
	    (u64)READ_ONCE(sk->sk_wmem_queued) * 3 >=
	    (u64)READ_ONCE(sk->sk_sndbuf) * 2)
		bs->nospace_ms = now ? : 1;
	return bs->nospace_ms && now - bs->nospace_ms < BERN_BACKLOG_MS;
}

/* The path whose queue drains first: queued bytes over pacing rate. */
static u32 bern_first_to_drain(const struct mptcp_sched_path *paths, u32 n)
{
	u64 best = U64_MAX, linger;
	u32 i, pick = 0;

	for (i = 0; i < n; i++) {
		const struct sock *ssk = paths[i].ssk;
		u64 pace = max_t(u64, READ_ONCE(ssk->sk_pacing_rate), 1);

		linger = div64_u64((u64)READ_ONCE(ssk->sk_wmem_queued) << 20,
				   pace);
		if (linger < best) {
			best = linger;
			pick = i;
		}
	}
	return pick;
}

/* Where a run of @segs segments goes: the path drawn, unless it would
 * arrive there more than @lag_us after the earliest path (@mu: the paths'
 * rate estimates).
 */
static u32 bern_bound_lag(struct mptcp_sock *msk,
			  const struct mptcp_sched_path *paths, u32 n,
			  const u64 *mu, u32 pick, u32 segs, u32 lag_us)
{
	u64 size = (u64)segs * tcp_sk(paths[pick].ssk)->mss_cache;
	u64 arrival[BERN_MAX_PATHS];
	struct dbal_path desc;
	u32 i, chosen;

	if (!lag_us || n < 2)
		return pick;
	for (i = 0; i < n; i++) {
		mptcp_sched_describe_rate(paths[i].ssk, mu[i], &desc);
		desc.queued = bern_waiting(desc.queued, desc.rate,
					   desc.owd_us);
		arrival[i] = dbal_arrival_us(&desc, size);
	}
	chosen = bern_bounded_pick(arrival, n, pick, lag_us);
	if (chosen != pick)
		MPTCP_INC_STATS(sock_net((struct sock *)msk),
				MPTCP_MIB_SCHEDRUNTOOLATE);
	return chosen;
}

/* Path and length of the next run. */
static u32 bern_new_run(struct mptcp_sock *msk, struct mptcp_sched_path *paths,
			u32 n, u32 now, u32 *segs)
{
	struct bern_pernet *pn = net_generic(sock_net((struct sock *)msk),
					     bern_net_id);
	u32 weight[BERN_MAX_PATHS];
	u64 mu[BERN_MAX_PATHS];
	u64 load;
	u32 i, pick;

	load = bern_update_load(msk, now);
	*segs = hywf_draw_burst(READ_ONCE(pn->cfg.batch), get_random_u32());
	if (READ_ONCE(pn->cfg.adaptive) && bern_backlogged(msk, now)) {
		MPTCP_INC_STATS(sock_net((struct sock *)msk),
				MPTCP_MIB_SCHEDBACKLOGRUN);
		return bern_first_to_drain(paths, n);
	}
	for (i = 0; i < n; i++)
		mu[i] = mptcp_sched_rate(paths[i].ssk, bern_rate(paths[i].ssk),
					 now);
	if (!READ_ONCE(pn->cfg.adaptive)) {
		bern_fixed_weights(READ_ONCE(pn->cfg.permille), n, weight);
		return hywf_pick_path(weight, n, get_random_u32());
	}
	bern_optimal_weights(mu, n, load, weight);
	pick = hywf_pick_path(weight, n, get_random_u32());
	return bern_bound_lag(msk, paths, n, mu, pick, *segs,
			      READ_ONCE(pn->cfg.max_lag_us));
}

static int bern_get_subflow(struct mptcp_sock *msk,
			    struct mptcp_sched_data *data)
{
	struct mptcp_sched_path paths[BERN_MAX_PATHS];
	struct bern_sock *bs = bern_sk(msk);
	u32 n, cur, now, segs;
	struct sock *backup;

	if (data->reinject)
		return mptcp_sched_pick(mptcp_subflow_get_retrans(msk));

	n = mptcp_sched_paths(msk, paths, BERN_MAX_PATHS, &backup);
	if (!n)
		return mptcp_sched_burst_backup(msk, &bs->run, backup);

	now = jiffies_to_msecs(jiffies);
	cur = mptcp_sched_burst_find(&bs->run, paths, n);
	if (cur == n || msk->snd_burst <= 0) {
		/* its subflow went stale with segments to send (one that
		 * closed was counted by bern_subflow_closed())
		 */
		if (cur == n && bs->run.subflow_id && msk->snd_burst > 0)
			mptcp_sched_burst_moved(msk);
		cur = bern_new_run(msk, paths, n, now, &segs);
		mptcp_sched_burst_start(msk, &bs->run, paths[cur].ssk, segs);
	}

	if (!sk_stream_memory_free(paths[cur].ssk))
		return mptcp_sched_burst_blocked(msk, &bs->run, paths, n, cur,
						 now);

	mptcp_sched_wait_end(&bs->run.wait);
	return mptcp_sched_pick(paths[cur].ssk);
}

/* The run's subflow is closing with segments of its run to send. */
static void bern_subflow_closed(struct mptcp_sock *msk,
				struct mptcp_subflow_context *subflow)
{
	mptcp_sched_burst_closed(msk, &bern_sk(msk)->run, subflow);
}

static void bern_init(struct mptcp_sock *msk)
{
	BUILD_BUG_ON(sizeof(struct bern_sock) > MPTCP_SCHED_PRIV_SIZE);
	BUILD_BUG_ON(sizeof(struct rate_est) >
		     MPTCP_SCHED_SUBFLOW_PRIV_SIZE);
	BUILD_BUG_ON(BERN_ONE != HYWF_ONE);
	BUILD_BUG_ON(BERN_MAX_PATHS > HYWF_MAX_PATHS);
	mptcp_sched_set_burst(msk, 0);
}

static struct mptcp_sched_ops mptcp_sched_bernoulli = {
	.get_subflow	= bern_get_subflow,
	.init		= bern_init,
	.subflow_closed	= bern_subflow_closed,
	.name		= "bernoulli",
	.flags		= MPTCP_SCHED_FLAG_SEGMENT_BURST |
			  MPTCP_SCHED_FLAG_EARLY_JOIN |
			  MPTCP_SCHED_FLAG_REINJECT_CARRIED,
	.owner		= THIS_MODULE,
};

static const unsigned int bern_permille_max = 1000;
static const unsigned int bern_batch_max = BERN_BATCH_MAX;
static const unsigned int bern_max_lag_us_max = BERN_MAX_LAG_US_MAX;

static struct bern_settings bern_defaults = {
	.adaptive	= 1,
	.permille	= BERN_PERMILLE_DEFAULT,
	.batch		= BERN_BATCH_DEFAULT,
	.max_lag_us	= BERN_MAX_LAG_US_DEFAULT,
};

/* .data points into bern_defaults; each namespace's copy is rebased. */
static const struct ctl_table bern_sysctl_table[] = {
	{
		.procname	= "bernoulli_adaptive",
		.data		= &bern_defaults.adaptive,
		.maxlen		= sizeof(unsigned int),
		.mode		= 0644,
		.proc_handler	= proc_douintvec_minmax,
		.extra1		= SYSCTL_ZERO,
		.extra2		= SYSCTL_ONE,
	},
	{
		.procname	= "bernoulli_permille",
		.data		= &bern_defaults.permille,
		.maxlen		= sizeof(unsigned int),
		.mode		= 0644,
		.proc_handler	= proc_douintvec_minmax,
		.extra1		= SYSCTL_ZERO,
		.extra2		= (void *)&bern_permille_max,
	},
	{
		.procname	= "bernoulli_batch",
		.data		= &bern_defaults.batch,
		.maxlen		= sizeof(unsigned int),
		.mode		= 0644,
		.proc_handler	= proc_douintvec_minmax,
		.extra1		= SYSCTL_ONE,
		.extra2		= (void *)&bern_batch_max,
	},
	{
		.procname	= "bernoulli_max_lag_us",
		.data		= &bern_defaults.max_lag_us,
		.maxlen		= sizeof(unsigned int),
		.mode		= 0644,
		.proc_handler	= proc_douintvec_minmax,
		.extra1		= SYSCTL_ZERO,
		.extra2		= (void *)&bern_max_lag_us_max,
	},
};

static int __net_init bern_net_init(struct net *net)
{
	struct bern_pernet *pn = net_generic(net, bern_net_id);

	pn->cfg = bern_defaults;
	pn->ctl_hdr = mptcp_sched_register_sysctl(net, bern_sysctl_table,
						  ARRAY_SIZE(bern_sysctl_table),
						  &bern_defaults, &pn->cfg);
	if (IS_ENABLED(CONFIG_SYSCTL) && !pn->ctl_hdr)
		return -ENOMEM;
	return 0;
}

static void __net_exit bern_net_exit(struct net *net)
{
	struct bern_pernet *pn = net_generic(net, bern_net_id);

	mptcp_sched_unregister_sysctl(pn->ctl_hdr);
}

static struct pernet_operations bern_net_ops = {
	.init	= bern_net_init,
	.exit	= bern_net_exit,
	.id	= &bern_net_id,
	.size	= sizeof(struct bern_pernet),
};

static int __init mptcp_bernoulli_register(void)
{
	int err;

	err = register_pernet_subsys(&bern_net_ops);
	if (err)
		return err;
	err = mptcp_register_scheduler(&mptcp_sched_bernoulli);
	if (err)
		unregister_pernet_subsys(&bern_net_ops);
	return err;
}
late_initcall(mptcp_bernoulli_register);
