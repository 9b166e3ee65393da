// SPDX-License-Identifier: GPL-2.0
/*
 * delaybal: send where the data arrives first (PluriBus's minimum-delay
 * path selection, after Chebrolu and Rao; Mahajan, Padhye, Agarwal, Zill,
 * "High performance vehicular connectivity with opportunistic erasure
 * coding", MSR-TR-2009-76).
 *
 * For every run of segments the scheduler estimates, per subflow,
 *
 *   arrival = (unacknowledged bytes + run) / delivery rate + one-way delay
 *
 * (delaybal_policy.h) and picks the earliest. The delivery rate is
 * mptcp_sched_rate() (the largest recent TCP delivery-rate sample), the
 * one-way delay half the subflow's minimum RTT; the rate is at least the
 * window's (cwnd * mss / srtt), so that a path given little data is not
 * judged by its own small load. On paths of different delays this keeps
 * short exchanges on the short path until its queue makes the long one
 * faster, where upstream's default, which looks at send-queue room only,
 * spreads them over both.
 *
 * When the earliest subflow cannot take data now (its send buffer is
 * full) and another can, the run still arrives sooner by waiting, but the
 * connection's pending data waits behind it: the scheduler sends on the
 * other subflow at once if the run arrives there no later than the
 * pending data would finish arriving on the full one (dbal_wait_pays(),
 * ECF's test). Otherwise it waits, within the framework's bound
 * (mptcp_sched_wait_for(): a few RTTs, at most 1 s), then sends on the
 * earliest subflow that can take it; each such move is counted in
 * MPTcpExtSchedBurstMoved. A subflow that has not carried data yet
 * takes one run as soon as the connection has more than that pending, so
 * that its estimate comes from data, not from its handshake alone
 * (dbal_untried()). Backup subflows carry data only when no other
 * subflow is active; retransmissions use the default choice.
 *
 * Parameter, per network namespace (net.mptcp.*):
 *   delaybal_batch  segments per decision, 1..64 (4): 1 decides for every
 *                   packet; longer runs keep TSO batching
 */

#define pr_fmt(fmt) "MPTCP: " fmt

#include <linux/init.h>
#include <linux/jiffies.h>
#include <linux/kernel.h>
#include <linux/sysctl.h>
#include <net/net_namespace.h>
#include <net/netns/generic.h>
#include <net/tcp.h>

#include "protocol.h"
#include "mib.h"

#define dbal_div_u64(a, b)	div64_u64(a, b)
#include "delaybal_policy.h"

#define DBAL_BATCH_DEFAULT	4
#define DBAL_BATCH_MAX		64

/**
 * struct dbal_sock - per-connection state, in msk's private area
 * @wait: waiting for the earliest subflow to take data
 */
struct dbal_sock {
	struct mptcp_sched_wait wait;
};

/**
 * struct dbal_pernet - per-namespace settings and sysctls
 * @batch: segments per decision
 * @ctl_hdr: registered sysctl table
 */
struct dbal_pernet {
	u32 batch;
	struct ctl_table_header *ctl_hdr;
};

static unsigned int dbal_net_id __read_mostly;

/*
 * A subflow that has carried no data yet is known by its handshake only,
 * and that round trip can be far longer than the path's: on a fresh link
 * the first packet waits for neighbour resolution (measured: 307 ms on a
 * 150 ms path). Judged by it, the subflow may never look earliest, and so
 * never carry the data whose acks would correct the estimate (measured:
 * nothing of a 16 MB upload). It gets the next run instead when the
 * connection has more than one run pending; a short exchange, which one
 * run holds, stays with the estimate.
 */
static u32 dbal_untried(const struct mptcp_sched_path *paths, u32 n,
			u32 can_send)
{
	u32 i;

	for (i = 0; i < n; i++)
		if ((can_send & (1U << i)) &&
		    !READ_ONCE(tcp_sk(paths[i].ssk)->data_segs_out))
			return i;
	return n;
}

static int dbal_get_subflow(struct mptcp_sock *msk,
			    struct mptcp_sched_data *data)
{
	struct dbal_pernet *pn = net_generic(sock_net((struct sock *)msk),
					     dbal_net_id);
	struct mptcp_sched_path paths[DBAL_MAX_PATHS];
	struct dbal_sock *ds = mptcp_sched_priv(msk);
	struct dbal_path desc[DBAL_MAX_PATHS];
	u32 n, i, best, first, now, batch, size;
	u32 all = 0, can_send = 0;
	u64 pending;
	struct sock *backup;

	if (data->reinject)
		return mptcp_sched_pick(mptcp_subflow_get_retrans(msk));

	n = mptcp_sched_paths(msk, paths, DBAL_MAX_PATHS, &backup);
	if (!n) {
		mptcp_sched_wait_end(&ds->wait);
		if (!backup || !sk_stream_memory_free(backup))
			return -EINVAL;
		mptcp_sched_set_burst(msk, MPTCP_SCHED_BACKUP_SEGS);
		return mptcp_sched_pick(backup);
	}

	now = jiffies_to_msecs(jiffies);
	batch = READ_ONCE(pn->batch);
	for (i = 0; i < n; i++) {
		mptcp_sched_describe(paths[i].ssk, now, &desc[i]);
		all |= 1U << i;
		if (sk_stream_memory_free(paths[i].ssk))
			can_send |= 1U << i;
	}
	size = batch * tcp_sk(paths[0].ssk)->mss_cache;
	pending = READ_ONCE(msk->write_seq) - READ_ONCE(msk->snd_nxt);
	best = pending > size ? dbal_untried(paths, n, can_send) : n;
	if (best < n)
		goto send;
	best = dbal_earliest(desc, n, size, all);

	if (!(can_send & (1U << best))) {
		first = best;
		best = dbal_earliest(desc, n, size, can_send);
		if (best == n)	/* all full: the next ack pushes again */
			return -EINVAL;
		if (dbal_wait_pays(&desc[first], &desc[best], size, pending)) {
			if (mptcp_sched_wait_for(msk, &ds->wait,
						 paths[first].ssk, now))
				return -EINVAL;
			MPTCP_INC_STATS(sock_net((struct sock *)msk),
					MPTCP_MIB_SCHEDBURSTMOVED);
		}
	}

send:
	mptcp_sched_wait_end(&ds->wait);
	mptcp_sched_set_burst(msk, batch);
	return mptcp_sched_pick(paths[best].ssk);
}

static void dbal_init(struct mptcp_sock *msk)
{
	BUILD_BUG_ON(sizeof(struct dbal_sock) > MPTCP_SCHED_PRIV_SIZE);
	BUILD_BUG_ON(sizeof(struct rate_est) >
		     MPTCP_SCHED_SUBFLOW_PRIV_SIZE);
	BUILD_BUG_ON(DBAL_MAX_PATHS > 32);
	mptcp_sched_set_burst(msk, 0);
}

static struct mptcp_sched_ops mptcp_sched_delaybal = {
	.get_subflow	= dbal_get_subflow,
	.init		= dbal_init,
	.name		= "delaybal",
	.flags		= MPTCP_SCHED_FLAG_SEGMENT_BURST |
			  MPTCP_SCHED_FLAG_EARLY_JOIN |
			  MPTCP_SCHED_FLAG_REINJECT_CARRIED,
	.owner		= THIS_MODULE,
};

static const unsigned int dbal_batch_max = DBAL_BATCH_MAX;
static struct dbal_pernet dbal_defaults = { .batch = DBAL_BATCH_DEFAULT };

/* .data points into dbal_defaults; each namespace's copy is rebased. */
static const struct ctl_table dbal_sysctl_table[] = {
	{
		.procname	= "delaybal_batch",
		.data		= &dbal_defaults.batch,
		.maxlen		= sizeof(unsigned int),
		.mode		= 0644,
		.proc_handler	= proc_douintvec_minmax,
		.extra1		= SYSCTL_ONE,
		.extra2		= (void *)&dbal_batch_max,
	},
};

static int __net_init dbal_net_init(struct net *net)
{
	struct dbal_pernet *pn = net_generic(net, dbal_net_id);

	pn->batch = dbal_defaults.batch;
	pn->ctl_hdr = mptcp_sched_register_sysctl(net, dbal_sysctl_table,
						  ARRAY_SIZE(dbal_sysctl_table),
						  &dbal_defaults, pn);
	if (IS_ENABLED(CONFIG_SYSCTL) && !pn->ctl_hdr)
		return -ENOMEM;
	return 0;
}

static void __net_exit dbal_net_exit(struct net *net)
{
	struct dbal_pernet *pn = net_generic(net, dbal_net_id);

	mptcp_sched_unregister_sysctl(pn->ctl_hdr);
}

static struct pernet_operations dbal_net_ops = {
	.init	= dbal_net_init,
	.exit	= dbal_net_exit,
	.id	= &dbal_net_id,
	.size	= sizeof(struct dbal_pernet),
};

static int __init mptcp_delaybal_register(void)
{
	int err;

	err = register_pernet_subsys(&dbal_net_ops);
	if (err)
		return err;
	err = mptcp_register_scheduler(&mptcp_sched_delaybal);
	if (err)
		unregister_pernet_subsys(&dbal_net_ops);
	return err;
}
late_initcall(mptcp_delaybal_register);
