// SPDX-License-Identifier: GPL-2.0
/*
 * HyWF: random split of a page load's packets over several networks, a
 * website-fingerprinting defense (Henri, Garcia-Aviles, Serrano, Banchs,
 * Thiran, "Protecting against website fingerprinting with multihoming",
 * PoPETs 2020).
 *
 * An observer of one network sees only part of a page load's packets, and
 * a different, random part each time. Per page load the sender draws a
 * split and then sends bursts of consecutive packets on one path each:
 *
 *   page load:  p ~ U[c - h, c + h],  c = ps, h = min(c, 1 - c)
 *               (U[0, 2 ps] for ps <= 1/2: favours a cheap second network;
 *                U[0, 1] by default; uniform on the simplex for 3+ paths)
 *   burst:      length L ~ Geometric(1 / ncons) packets, mean ncons
 *               path 1 with probability p, else path 2
 *
 * The paper measured the k-FP attack's true-positive rate falling from 91%
 * to 36% (closed world) with no bandwidth overhead. Both ends run the
 * scheduler independently: the client splits what it sends, the proxy what
 * it returns.
 *
 * The unit is the page load, not the connection. A browser loads a page
 * over tens of connections; a split per connection would show each
 * observer an average of many draws, close to one half of every page. So
 * the split lives in an epoch shared, per hywf_scope, by
 *
 *   0  each connection alone (the thesis prototype's behaviour),
 *   1  all connections to one peer address (default: on the client, every
 *      connection to the proxy; on the proxy, every connection of one
 *      client),
 *   2  all connections of the network namespace,
 *
 * and paths are numbered in the same order in every connection (by
 * subflow addresses), so that "path 1" is the same network for all of
 * them. Per peer, the namespace keeps up to HYWF_PEERS_MAX peers' splits
 * at once and never takes one from a peer whose page is under way: a
 * connection to a further peer splits on its own
 * (MPTcpExtSchedPeerTableFull counts them). MPTcpExtSchedSplitDrawn
 * counts the splits drawn. An epoch starts a new split when all
 * of its connections have been idle for hywf_idle_ms (a Tor connection
 * carries many page loads), and when its number of paths changes:
 *
 *   no split --first burst, 2+ paths--> split drawn --epoch idle--> redrawn
 *                                            |                        ^
 *                                            +--- a network comes/goes +
 *
 * No single-network first flight: a new connection has one subflow until
 * the others join, about one round trip after the peer's first data. On
 * the side that answers (the proxy), the first flight would cross one
 * network whole, and small objects would be seen entire by its observer.
 * So a connection that has had one subflow only holds its data for up to
 * hywf_join_wait_ms for a second one to join (MPTcpExtSchedJoinWait counts
 * the holds, MPTcpExtSchedJoinWaitTimeout those that gave up), on both
 * ends: a client's subflows can join before its first data because a braid
 * server acknowledges the client's keys when it accepts the connection.
 * What leaves on one subflow (a hold that gave up, or hywf_join_wait_ms 0)
 * stays out of the shared split, and its burst ends when a path joins, so
 * that the rest of the flight follows the split.
 *
 * Bursts are the page's too. A page's connections send at once, and had
 * each its own bursts they would interleave on both networks: each
 * observer would see the whole page thinned into runs of a few packets,
 * which classifiers read almost as well as the page itself. So the epoch
 * holds the page's current burst, and each connection takes it in pieces
 * of ncons / 4 packets (hywf_take_burst()); a connection whose data runs
 * out first gives the rest of its piece back (hywf_burst_unused();
 * MPTcpExtSchedPieceGivenBack counts them). The page's packets cross the
 * networks in runs of ncons on average, whichever connections carry them,
 * small objects included.
 *
 * Bursts are counted in segments on the wire: the push path cuts a piece
 * of L at exactly L packets of the MSS in use.
 *
 * Never stalling: when the burst's subflow cannot take data the scheduler
 * waits, because sending the burst elsewhere would make the split follow
 * the paths' capacities and leak them. If it is still blocked after
 * MPTCP_SCHED_STALL_RTTS smoothed RTTs (clamped to [MPTCP_SCHED_STALL_MIN_MS,
 * MPTCP_SCHED_STALL_MAX_MS]) the burst moves to another subflow; the scheduler
 * arms a retry so that this holds even when no ACK comes back. A burst
 * whose subflow went away or went stale also moves. MPTcpExtSchedBurstMoved
 * counts every burst moved. Backup subflows carry data only when no other
 * subflow is active. Retransmissions (reinjections) use the default choice:
 * there is nothing left to hide.
 *
 * Parameters, per network namespace (net.mptcp.*):
 *   hywf_ps_permille   centre of the first path's split range, 0..1000 (500)
 *   hywf_ncons         mean burst length in packets, 1..10000 (20, as HyWF)
 *   hywf_idle_ms       idle gap that starts a new split, 1..3600000 (500)
 *   hywf_scope         what shares a split, 0..2 (1: per peer)
 *   hywf_join_wait_ms  longest hold of a first flight, 0..10000 (200; 0: off)
 *   hywf_nchp          mean packets between redraws of a connection's split
 *                      around its page's, HyWF-AP's dynamic p, 0..10000
 *                      (0: off; the thesis used 100)
 */

#define pr_fmt(fmt) "MPTCP: " fmt

#include <linux/hashtable.h>
#include <linux/init.h>
#include <linux/jhash.h>
#include <linux/jiffies.h>
#include <linux/kernel.h>
#include <linux/random.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/sysctl.h>
#include <net/net_namespace.h>
#include <net/netns/generic.h>
#include <net/tcp.h>

#include "protocol.h"
#include "mib.h"

#define hywf_div_u64(a, b)	div64_u64(a, b)
#include "hywf_policy.h"

#define HYWF_PS_PERMILLE_DEFAULT	500
#define HYWF_NCONS_DEFAULT		20
#define HYWF_NCONS_MAX			10000
#define HYWF_IDLE_MS_DEFAULT		500
#define HYWF_IDLE_MS_MAX		3600000
#define HYWF_SCOPE_CONNECTION		0
#define HYWF_SCOPE_PEER			1
#define HYWF_SCOPE_NAMESPACE		2
#define HYWF_JOIN_WAIT_MS_DEFAULT	200
#define HYWF_JOIN_WAIT_MS_MAX		10000
#define HYWF_NCHP_MAX			10000
/* how often a held first flight looks for a joined subflow */
#define HYWF_JOIN_POLL_MS		5
/* Peers with a split of their own, per namespace: the most at once, and
 * the hash table that finds them. A peer idle for hywf_idle_ms has no page
 * under way; its entry is freed when its bucket is next used, or by a
 * sweep of the table when it is full (at most once per hywf_idle_ms).
 */
#define HYWF_PEERS_MAX			4096
#define HYWF_PEER_HASH_BITS		8

enum hywf_join {
	HYWF_JOIN_UNDECIDED,	/* no data scheduled yet */
	HYWF_JOIN_HOLDING,	/* first flight held for a join */
	HYWF_JOIN_DONE,		/* joined, gave up, or never needed */
};

/**
 * struct hywf_sock - per-connection scheduler state, in msk's private area
 * @own: the split when hywf_scope is per connection
 * @last_ms: the connection's last decision, for its own idle detection
 * @burst: the current burst's subflow, and the wait for it
 * @join_start_ms: when the first flight started waiting for a join
 * @join: enum hywf_join
 * @burst_paths: usable paths when the current burst was drawn
 * @drift: the connection's split drifting around its epoch's (hywf_nchp)
 * @epoch_touch_ms: when the connection last refreshed its epoch, or drew
 *	from it (hywf_epoch_touch_due())
 * @piece_seq: the page's burst the current burst is a piece of, 0 for a
 *	burst of the connection's own (hywf_take_burst())
 * @lent: segments of the piece given back to the page while the queue was
 *	empty, which the connection takes back when it sends again
 */
struct hywf_sock {
	struct hywf_epoch own;
	struct hywf_drift drift;
	u32 last_ms;
	u32 epoch_touch_ms;
	u32 piece_seq;
	u32 lent;
	struct mptcp_sched_burst burst;
	u32 join_start_ms;
	u8 join;
	u8 burst_paths;
};

/**
 * struct hywf_peer - the epoch of every connection to one peer
 * @node: in hywf_pernet's @peers
 * @addr: the peer's address, IPv4 mapped into IPv6
 * @epoch: its split
 */
struct hywf_peer {
	struct hlist_node node;
	struct in6_addr addr;
	struct hywf_epoch epoch;
};

/**
 * struct hywf_settings - per-namespace parameters, set through sysctls
 * @params: split centre and mean burst length
 * @idle_ms: idle gap that starts a new split
 * @scope: what shares a split, HYWF_SCOPE_*
 * @join_wait_ms: longest hold of a first flight for a join, 0 for none
 */
struct hywf_settings {
	struct hywf_params params;
	u32 idle_ms;
	u32 scope;
	u32 join_wait_ms;
};

/**
 * struct hywf_pernet - per-namespace settings, shared epochs, sysctls
 * @cfg: the settings
 * @lock: protects @ns_epoch and @peers
 * @hash_seed: keeps remote peers from choosing which slots they share
 * @ns_epoch: the split of every connection, for HYWF_SCOPE_NAMESPACE
 * @peers: the splits per peer, for HYWF_SCOPE_PEER
 * @nr_peers: entries in @peers, at most HYWF_PEERS_MAX
 * @swept_ms: when @peers was last swept for idle peers
 * @ctl_hdr: registered sysctl table
 */
struct hywf_pernet {
	struct hywf_settings cfg;
	spinlock_t lock;	/* protects ns_epoch and peers */
	u32 hash_seed;
	struct hywf_epoch ns_epoch;
	DECLARE_HASHTABLE(peers, HYWF_PEER_HASH_BITS);
	u32 nr_peers;
	u32 swept_ms;
	struct ctl_table_header *ctl_hdr;
};

static unsigned int hywf_net_id __read_mostly;

static u32 hywf_get_random(void *ctx)
{
	return get_random_u32();
}

static struct hywf_rand hywf_rand = { .next = hywf_get_random };

static u32 hywf_now_ms(void)
{
	return jiffies_to_msecs(jiffies);
}

static struct hywf_sock *hywf_sk(struct mptcp_sock *msk)
{
	return mptcp_sched_priv(msk);
}

static struct hywf_pernet *hywf_pernet(const struct mptcp_sock *msk)
{
	return net_generic(sock_net((const struct sock *)msk), hywf_net_id);
}

static u32 hywf_peer_hash(const struct hywf_pernet *pn,
			  const struct in6_addr *addr)
{
	return jhash(addr, sizeof(*addr), pn->hash_seed);
}

/* The epoch of @addr's connections (@hash: hywf_peer_hash()), or NULL.
 * Called with pn->lock held.
 */
static struct hywf_epoch *hywf_peer_find(struct hywf_pernet *pn,
					 const struct in6_addr *addr, u32 hash)
{
	struct hywf_peer *peer;

	hash_for_each_possible(pn->peers, peer, node, hash)
		if (ipv6_addr_equal(&peer->addr, addr))
			return &peer->epoch;
	return NULL;
}

static void hywf_peer_free(struct hywf_pernet *pn, struct hywf_peer *peer)
{
	hash_del(&peer->node);
	kfree(peer);
	pn->nr_peers--;
}

/* Free the entries of @bucket's peers that are idle: their next burst
 * would draw a new split anyway. Called with pn->lock held.
 */
static void hywf_peers_reap(struct hywf_pernet *pn, struct hlist_head *bucket,
			    u32 now, u32 idle_ms)
{
	struct hlist_node *tmp;
	struct hywf_peer *peer;

	hlist_for_each_entry_safe(peer, tmp, bucket, node)
		if (hywf_idle_expired(now, peer->epoch.last_ms, idle_ms))
			hywf_peer_free(pn, peer);
}

/* The epoch of @addr's connections, a new one if @addr has none. NULL when
 * the table is full of peers with a page under way: no peer's split is
 * taken from it mid-page to make room. Called with pn->lock held.
 */
static struct hywf_epoch *hywf_peer_epoch(struct hywf_pernet *pn,
					  const struct in6_addr *addr, u32 now,
					  u32 idle_ms)
{
	u32 hash = hywf_peer_hash(pn, addr);
	struct hywf_peer *peer;
	struct hywf_epoch *epoch;
	u32 bkt;

	epoch = hywf_peer_find(pn, addr, hash);
	if (epoch)
		return epoch;
	hywf_peers_reap(pn, &pn->peers[hash_min(hash, HYWF_PEER_HASH_BITS)],
			now, idle_ms);
	if (pn->nr_peers >= HYWF_PEERS_MAX &&
	    hywf_idle_expired(now, pn->swept_ms, idle_ms)) {
		pn->swept_ms = now;
		for (bkt = 0; bkt < HASH_SIZE(pn->peers); bkt++)
			hywf_peers_reap(pn, &pn->peers[bkt], now, idle_ms);
	}
	if (pn->nr_peers >= HYWF_PEERS_MAX)
		return NULL;
	peer = kzalloc(sizeof(*peer), GFP_ATOMIC);
	if (!peer)
		return NULL;
	peer->addr = *addr;
	/* a piece of a freed entry's burst must not match this one's */
	peer->epoch.burst_seq = get_random_u32();
	hash_add(pn->peers, &peer->node, hash);
	pn->nr_peers++;
	return &peer->epoch;
}

/* Draw the next burst from the connection's epoch. A connection whose peer
 * finds no room in a full table splits on its own, as with
 * HYWF_SCOPE_CONNECTION.
 */
static u32 hywf_new_burst(struct mptcp_sock *msk, u32 n, u32 now, u32 *pkts)
{
	struct hywf_pernet *pn = hywf_pernet(msk);
	struct net *net = sock_net((struct sock *)msk);
	struct hywf_sock *hs = hywf_sk(msk);
	struct in6_addr local, remote;
	struct hywf_params params;
	struct hywf_epoch *epoch;
	u32 idle_ms, scope, path, draws;

	params.ps_permille = READ_ONCE(pn->cfg.params.ps_permille);
	params.ncons = READ_ONCE(pn->cfg.params.ncons);
	params.nchp = READ_ONCE(pn->cfg.params.nchp);
	idle_ms = READ_ONCE(pn->cfg.idle_ms);
	scope = READ_ONCE(pn->cfg.scope);

	if (scope == HYWF_SCOPE_CONNECTION) {
		draws = hs->own.draws;
		path = hywf_take_burst(&hs->own, &params, n, now, idle_ms,
				       &hs->drift, &hywf_rand, pkts,
				       &hs->piece_seq);
		if (hs->own.draws != draws)
			MPTCP_INC_STATS(net, MPTCP_MIB_SCHEDSPLITDRAWN);
		return path;
	}

	spin_lock_bh(&pn->lock);
	if (scope == HYWF_SCOPE_NAMESPACE) {
		epoch = &pn->ns_epoch;
	} else {
		mptcp_sched_sk_addrs((struct sock *)msk, &local, &remote);
		epoch = hywf_peer_epoch(pn, &remote, now, idle_ms);
		if (!epoch) {
			MPTCP_INC_STATS(net, MPTCP_MIB_SCHEDPEERTABLEFULL);
			epoch = &hs->own;
		}
	}
	draws = epoch->draws;
	path = hywf_take_burst(epoch, &params, n, now, idle_ms, &hs->drift,
			       &hywf_rand, pkts, &hs->piece_seq);
	if (epoch->draws != draws)
		MPTCP_INC_STATS(net, MPTCP_MIB_SCHEDSPLITDRAWN);
	spin_unlock_bh(&pn->lock);
	if (epoch == &hs->own)	/* not the peer's: nothing to give back */
		hs->piece_seq = 0;
	return path;
}

/* The epoch of the connection's page, for a connection already using
 * it: a peer's entry is looked up, never made (one freed meanwhile held a
 * page that is over), so the result may be NULL. A shared epoch comes
 * with pn->lock held; hywf_epoch_put() releases it.
 */
static struct hywf_epoch *hywf_epoch_get(struct mptcp_sock *msk, u32 scope)
{
	struct hywf_pernet *pn = hywf_pernet(msk);
	struct in6_addr local, remote;

	if (scope == HYWF_SCOPE_CONNECTION)
		return &hywf_sk(msk)->own;
	spin_lock_bh(&pn->lock);
	if (scope == HYWF_SCOPE_NAMESPACE)
		return &pn->ns_epoch;
	mptcp_sched_sk_addrs((struct sock *)msk, &local, &remote);
	return hywf_peer_find(pn, &remote, hywf_peer_hash(pn, &remote));
}

static void hywf_epoch_put(struct mptcp_sock *msk, u32 scope)
{
	if (scope != HYWF_SCOPE_CONNECTION)
		spin_unlock_bh(&hywf_pernet(msk)->lock);
}

/* The connection's burst goes on: keep its page's split alive (see
 * hywf_epoch_touch_due()).
 */
static void hywf_keep_epoch(struct mptcp_sock *msk, u32 n, u32 now,
			    u32 idle_ms)
{
	struct hywf_sock *hs = hywf_sk(msk);
	struct hywf_epoch *epoch;
	u32 scope;

	if (n < 2 || !hywf_epoch_touch_due(&hs->epoch_touch_ms, now, idle_ms))
		return;
	scope = READ_ONCE(hywf_pernet(msk)->cfg.scope);
	epoch = hywf_epoch_get(msk, scope);
	if (epoch)
		hywf_epoch_touch(epoch, n, now, idle_ms);
	hywf_epoch_put(msk, scope);
}

/* The connection sends again after giving the rest of its piece back
 * (hywf_burst_unused()): its burst goes on with what no other connection
 * has taken meanwhile, and ends if that is nothing. A burst that ended
 * meanwhile (its subflow closed) claims nothing.
 */
static void hywf_reclaim(struct mptcp_sock *msk, u32 now)
{
	struct hywf_pernet *pn = hywf_pernet(msk);
	struct hywf_sock *hs = hywf_sk(msk);
	struct hywf_epoch *epoch;
	u32 scope, back = 0;

	if (msk->snd_burst > 0) {
		scope = READ_ONCE(pn->cfg.scope);
		epoch = hywf_epoch_get(msk, scope);
		if (epoch)
			back = hywf_take_back(epoch, hs->burst_paths,
					      hs->piece_seq, hs->lent, now,
					      READ_ONCE(pn->cfg.idle_ms));
		hywf_epoch_put(msk, scope);
		mptcp_sched_set_burst(msk, back);
	}
	hs->lent = 0;
}

/* Hold the first flight of a connection that has had one subflow only,
 * for at most hywf_join_wait_ms, so that it does not cross one network
 * whole. The hold ends when a second subflow can take data: on a client,
 * not when the join starts but when the peer has confirmed it. A client
 * may start a join only once the peer has acknowledged its keys, which a
 * braid server does when it accepts the connection; against a peer that
 * waits for data instead, the hold runs out.
 */
static bool hywf_hold_for_join(struct mptcp_sock *msk, u32 n, u32 now)
{
	struct hywf_sock *hs = hywf_sk(msk);
	u32 wait_ms, elapsed;

	if (hs->join == HYWF_JOIN_DONE)
		return false;
	wait_ms = READ_ONCE(hywf_pernet(msk)->cfg.join_wait_ms);
	if (n >= 2 || !wait_ms) {
		hs->join = HYWF_JOIN_DONE;
		return false;
	}
	if (hs->join == HYWF_JOIN_UNDECIDED) {
		hs->join = HYWF_JOIN_HOLDING;
		hs->join_start_ms = now;
		MPTCP_INC_STATS(sock_net((struct sock *)msk),
				MPTCP_MIB_SCHEDJOINWAIT);
	}
	elapsed = now - hs->join_start_ms;
	if (elapsed >= wait_ms) {
		hs->join = HYWF_JOIN_DONE;
		MPTCP_INC_STATS(sock_net((struct sock *)msk),
				MPTCP_MIB_SCHEDJOINWAITTIMEOUT);
		return false;
	}
	mptcp_sched_retry(msk, min_t(u32, HYWF_JOIN_POLL_MS, wait_ms - elapsed));
	return true;
}

static int hywf_get_subflow(struct mptcp_sock *msk,
			    struct mptcp_sched_data *data)
{
	struct hywf_pernet *pn = hywf_pernet(msk);
	struct mptcp_sched_path paths[HYWF_MAX_PATHS];
	struct hywf_sock *hs = hywf_sk(msk);
	u32 n, cur, now, pkts, idle_ms;
	struct sock *backup;

	if (data->reinject)
		return mptcp_sched_pick(mptcp_subflow_get_retrans(msk));

	/* the same networks in the same order in every connection */
	n = mptcp_sched_paths(msk, paths, HYWF_MAX_PATHS, &backup);
	if (!n) {	/* the policy's burst is over: afresh on recovery */
		hs->piece_seq = 0;
		hs->lent = 0;
		return mptcp_sched_burst_backup(msk, &hs->burst, backup);
	}

	now = hywf_now_ms();
	if (hywf_hold_for_join(msk, n, now))
		return -EINVAL;
	if (hs->lent)
		hywf_reclaim(msk, now);

	idle_ms = READ_ONCE(pn->cfg.idle_ms);
	cur = mptcp_sched_burst_find(&hs->burst, paths, n);
	if (hywf_keep_burst(&hs->last_ms, cur < n, hs->burst.wait.start_ms,
			    hs->burst_paths, n, msk->snd_burst, now, idle_ms)) {
		hywf_keep_epoch(msk, n, now, idle_ms);
	} else {
		/* its subflow went stale with segments to send (one that
		 * closed was counted by hywf_subflow_closed())
		 */
		if (cur == n && hs->burst.subflow_id && msk->snd_burst > 0)
			mptcp_sched_burst_moved(msk);
		cur = hywf_new_burst(msk, n, now, &pkts);
		hs->lent = 0;
		hs->last_ms = now;
		hs->epoch_touch_ms = now;
		hs->burst_paths = n;
		mptcp_sched_burst_start(msk, &hs->burst, paths[cur].ssk, pkts);
	}

	if (!sk_stream_memory_free(paths[cur].ssk))
		return mptcp_sched_burst_blocked(msk, &hs->burst, paths, n, cur,
						 now);

	mptcp_sched_wait_end(&hs->burst.wait);
	return mptcp_sched_pick(paths[cur].ssk);
}

/* The connection has sent all its data with @segs segments of its burst
 * left. If the burst was a piece of its page's, the rest goes back to the
 * page (hywf_give_back()): the page's next packets, whichever connection
 * sends them, continue the burst on its path, as HyWF's bursts of a page
 * do, instead of the page's burst ending that much shorter. The
 * connection keeps its burst as a claim on what it gave: when it has data
 * again it takes back what no other connection took (hywf_reclaim()), so a
 * sender whose queue runs dry between two writes goes on as if it had
 * kept it. A piece of a page that moved on ends here; one of a
 * connection whose peer found no room in the table is not given back.
 *
 * Return: true to end the burst now.
 */
static bool hywf_burst_unused(struct mptcp_sock *msk, int segs)
{
	struct hywf_pernet *pn = hywf_pernet(msk);
	struct hywf_sock *hs = hywf_sk(msk);
	struct hywf_epoch *epoch;
	bool given = false;
	u32 scope;

	if (!hs->piece_seq || hs->lent)
		return false;
	scope = READ_ONCE(pn->cfg.scope);
	epoch = hywf_epoch_get(msk, scope);
	if (epoch)
		given = hywf_give_back(epoch, hs->burst_paths, hs->piece_seq,
				       segs, hywf_now_ms(),
				       READ_ONCE(pn->cfg.idle_ms));
	hywf_epoch_put(msk, scope);
	if (!given) {
		hs->piece_seq = 0;
		return true;
	}
	hs->lent = segs;
	MPTCP_INC_STATS(sock_net((struct sock *)msk),
			MPTCP_MIB_SCHEDPIECEGIVENBACK);
	return false;
}

/* The burst's subflow is closing with segments of its burst to send: the
 * burst is moved, whatever takes over; the next call draws afresh.
 */
static void hywf_subflow_closed(struct mptcp_sock *msk,
				struct mptcp_subflow_context *subflow)
{
	mptcp_sched_burst_closed(msk, &hywf_sk(msk)->burst, subflow);
}

static void hywf_init(struct mptcp_sock *msk)
{
	BUILD_BUG_ON(sizeof(struct hywf_sock) > MPTCP_SCHED_PRIV_SIZE);
	mptcp_sched_set_burst(msk, 0);
}

static struct mptcp_sched_ops mptcp_sched_hywf = {
	.get_subflow	= hywf_get_subflow,
	.init		= hywf_init,
	.subflow_closed	= hywf_subflow_closed,
	.burst_unused	= hywf_burst_unused,
	.name		= "hywf",
	.flags		= MPTCP_SCHED_FLAG_SEGMENT_BURST |
			  MPTCP_SCHED_FLAG_FULL_PACKET_END |
			  MPTCP_SCHED_FLAG_EARLY_JOIN |
			  MPTCP_SCHED_FLAG_REINJECT_CARRIED,
	.owner		= THIS_MODULE,
};

static const unsigned int hywf_ps_permille_max = HYWF_PERMILLE;
static const unsigned int hywf_ncons_max = HYWF_NCONS_MAX;
static const unsigned int hywf_idle_ms_max = HYWF_IDLE_MS_MAX;
static const unsigned int hywf_scope_max = HYWF_SCOPE_NAMESPACE;
static const unsigned int hywf_join_wait_ms_max = HYWF_JOIN_WAIT_MS_MAX;
static const unsigned int hywf_nchp_max = HYWF_NCHP_MAX;

static struct hywf_settings hywf_defaults = {
	.params = {
		.ps_permille	= HYWF_PS_PERMILLE_DEFAULT,
		.ncons		= HYWF_NCONS_DEFAULT,
	},
	.idle_ms	= HYWF_IDLE_MS_DEFAULT,
	.scope		= HYWF_SCOPE_PEER,
	.join_wait_ms	= HYWF_JOIN_WAIT_MS_DEFAULT,
};

/* .data points into hywf_defaults; each namespace's copy is rebased. */
static const struct ctl_table hywf_sysctl_table[] = {
	{
		.procname	= "hywf_ps_permille",
		.data		= &hywf_defaults.params.ps_permille,
		.maxlen		= sizeof(unsigned int),
		.mode		= 0644,
		.proc_handler	= proc_douintvec_minmax,
		.extra1		= SYSCTL_ZERO,
		.extra2		= (void *)&hywf_ps_permille_max,
	},
	{
		.procname	= "hywf_ncons",
		.data		= &hywf_defaults.params.ncons,
		.maxlen		= sizeof(unsigned int),
		.mode		= 0644,
		.proc_handler	= proc_douintvec_minmax,
		.extra1		= SYSCTL_ONE,
		.extra2		= (void *)&hywf_ncons_max,
	},
	{
		.procname	= "hywf_idle_ms",
		.data		= &hywf_defaults.idle_ms,
		.maxlen		= sizeof(unsigned int),
		.mode		= 0644,
		.proc_handler	= proc_douintvec_minmax,
		.extra1		= SYSCTL_ONE,
		.extra2		= (void *)&hywf_idle_ms_max,
	},
	{
		.procname	= "hywf_scope",
		.data		= &hywf_defaults.scope,
		.maxlen		= sizeof(unsigned int),
		.mode		= 0644,
		.proc_handler	= proc_douintvec_minmax,
		.extra1		= SYSCTL_ZERO,
		.extra2		= (void *)&hywf_scope_max,
	},
	{
		.procname	= "hywf_join_wait_ms",
		.data		= &hywf_defaults.join_wait_ms,
		.maxlen		= sizeof(unsigned int),
		.mode		= 0644,
		.proc_handler	= proc_douintvec_minmax,
		.extra1		= SYSCTL_ZERO,
		.extra2		= (void *)&hywf_join_wait_ms_max,
	},
	{
		.procname	= "hywf_nchp",
		.data		= &hywf_defaults.params.nchp,
		.maxlen		= sizeof(unsigned int),
		.mode		= 0644,
		.proc_handler	= proc_douintvec_minmax,
		.extra1		= SYSCTL_ZERO,
		.extra2		= (void *)&hywf_nchp_max,
	},
};

static int __net_init hywf_net_init(struct net *net)
{
	struct hywf_pernet *pn = net_generic(net, hywf_net_id);

	pn->cfg = hywf_defaults;
	spin_lock_init(&pn->lock);
	pn->hash_seed = get_random_u32();
	hash_init(pn->peers);
	pn->ctl_hdr = mptcp_sched_register_sysctl(net, hywf_sysctl_table,
						  ARRAY_SIZE(hywf_sysctl_table),
						  &hywf_defaults, &pn->cfg);
	if (IS_ENABLED(CONFIG_SYSCTL) && !pn->ctl_hdr)
		return -ENOMEM;
	return 0;
}

static void __net_exit hywf_net_exit(struct net *net)
{
	struct hywf_pernet *pn = net_generic(net, hywf_net_id);
	struct hlist_node *tmp;
	struct hywf_peer *peer;
	u32 bkt;

	mptcp_sched_unregister_sysctl(pn->ctl_hdr);
	hash_for_each_safe(pn->peers, bkt, tmp, peer, node)
		hywf_peer_free(pn, peer);
}

static struct pernet_operations hywf_net_ops = {
	.init	= hywf_net_init,
	.exit	= hywf_net_exit,
	.id	= &hywf_net_id,
	.size	= sizeof(struct hywf_pernet),
};

static int __init mptcp_hywf_register(void)
{
	int err;

	err = register_pernet_subsys(&hywf_net_ops);
	if (err)
		return err;
	err = mptcp_register_scheduler(&mptcp_sched_hywf);
	if (err)
		unregister_pernet_subsys(&hywf_net_ops);
	return err;
}
late_initcall(mptcp_hywf_register);
