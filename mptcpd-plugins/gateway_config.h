// SPDX-License-Identifier: BSD-3-Clause
/**
 * @file gateway_config.h
 *
 * @brief gwsteer configuration: gateways and path manager parameters.
 *
 * The file is INI style (ELL l_settings here, configparser in the
 * Python helper): one @c [gwsteer] section and one
 * @c [gateway <id>] section per gateway.  See README.md.
 */

#ifndef GWSTEER_GATEWAY_CONFIG_H
#define GWSTEER_GATEWAY_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "gwsteer_defaults.h"

struct l_queue;

/**
 * @brief What this mptcpd instance does for MPTCP connections.
 */
enum gwsteer_role {
        /// Open one subflow per healthy gateway on every connection.
        GWSTEER_ROLE_CLIENT,
        /// Announce extra addresses, accept a bounded number of joins.
        GWSTEER_ROLE_PROXY
};

/**
 * @struct gateway_prefix
 *
 * @brief An address prefix, as in @c peers = 10.200.0.1/32.
 */
struct gateway_prefix
{
        /// The prefix's address (port 0); its family is the prefix's.
        struct sockaddr_storage addr;

        /// Prefix length in bits.
        unsigned int len;
};

/**
 * @struct gateway_spec
 *
 * @brief One configured gateway, as validated from its section.
 *
 * The hop list itself is only needed by the routing helper, which
 * installs the routes that make it true; the plugin keeps the count
 * for the log and checks the list for consistency so that both
 * readers of the file accept exactly the same files.
 */
struct gateway_spec
{
        /// Gateway identifier, the @c <id> of @c [gateway <id>].
        char id[GWSTEER_MAX_ID_LEN + 1];

        /**
         * @brief Local source address whose traffic leaves via this
         *        gateway, or @c AF_UNSPEC: the address of @a interface.
         */
        struct sockaddr_storage source;

        /**
         * @brief Interface the gateway follows, or "" for none.
         *
         * The gateway's source is the interface's current address of
         * @a family (DHCP, RA, hotplug), or @a source if both are set;
         * without an address on the interface the gateway is down.
         */
        char interface[IF_NAMESIZE];

        /// Address family of the gateway: @c AF_INET or @c AF_INET6.
        sa_family_t family;

        /// ICMP echo target used to probe the path via this gateway.
        struct sockaddr_storage probe;

        /// Subflows through this gateway carry the MPTCP backup flag.
        bool backup;

        /**
         * @brief Number of entries in the hop list.
         *
         * 0 only with @a interface: the next hop is the interface's
         * default route, as DHCP or RA installed it.
         */
        unsigned int hop_count;

        /// The hop list, in travel order (gwsteer-check prints it).
        struct sockaddr_storage hops[GWSTEER_MAX_HOPS];

        /**
         * @brief The peers this gateway reaches; none: every peer.
         *
         * A peer is served by the gateways whose prefix matches it
         * longest, as a route is chosen: a gateway that reaches only
         * the proxy's address inside a tunnel (peers = that /32) then
         * serves connections to that address alone, and the other
         * gateways do not try it.
         */
        struct gateway_prefix peers[GWSTEER_MAX_PEERS];

        /// Number of entries in @a peers.
        unsigned int peer_count;

        /**
         * @brief Another tool routes @a source (route = external).
         *
         * gwsteer-route then installs nothing for this gateway: a
         * tunnel's hook routes its address once the tunnel is up.
         */
        bool route_external;
};

/**
 * @struct gwsteer_config
 *
 * @brief The whole validated configuration.
 *
 * Field defaults come from gwsteer_defaults.h.
 */
struct gwsteer_config
{
        /// Client or proxy behaviour.
        enum gwsteer_role role;

        /// Path of the JSON status file.
        char *status_file;

        /// Longest time between two status file writes.
        unsigned int status_interval_ms;

        /// Default probe target (@c AF_UNSPEC if none).
        struct sockaddr_storage probe_target;

        /// Time between two probes of one gateway.
        unsigned int probe_interval_ms;

        /// Time after which an unanswered probe counts as lost.
        unsigned int probe_timeout_ms;

        /// Consecutive losses that take a gateway down.
        unsigned int fail_after;

        /// Consecutive answers that bring a gateway back up.
        unsigned int recover_after;

        /// Minimum time a gateway stays down (before flap damping).
        unsigned int hold_ms;

        /// Weight of history in the RTT and AvMet EWMAs.
        double ewma_alpha;

        /// Only the best gateway is non-backup.
        bool prefer_best;

        /// AvMet score margin a challenger needs to become best.
        double switch_margin;

        /// Per-connection subflow cap (created or accepted).
        unsigned int max_subflows;

        /// Time after which a requested subflow is given up.
        unsigned int subflow_timeout_ms;

        /// Client: unacknowledged time that stalls a subflow (0: off).
        unsigned int stall_ms;

        /// Client: remove a stalled subflow rather than flag it backup.
        bool stall_remove;

        /// Proxy: addresses to announce (struct sockaddr_storage *).
        struct l_queue *announce;

        /// Routing helper: gateway k uses routing table base + k.
        unsigned int route_table_base;

        /// Routing helper: priority of the from-source rules.
        unsigned int rule_priority;

        /// Gateways in file order (struct gateway_spec *).
        struct l_queue *gateways;
};

/**
 * @brief Load and validate a gateway configuration file.
 *
 * @param[in] path Configuration file path.
 *
 * @return The configuration, or @c NULL after logging an error that
 *         names the file, the section and the field at fault.
 */
struct gwsteer_config *gwsteer_config_load(char const *path);

/**
 * @brief Free a configuration returned by gwsteer_config_load().
 *
 * @param[in] config Configuration, may be @c NULL.
 */
void gwsteer_config_free(struct gwsteer_config *config);

/**
 * @brief Parse a textual IPv4 or IPv6 address.
 *
 * @param[in]  text Address, e.g. "10.1.1.2" or "fc00::1".
 * @param[out] ss   Filled with the address and port 0.
 *
 * @return @c true on success.
 */
bool gwsteer_parse_addr(char const *text, struct sockaddr_storage *ss);

/**
 * @brief How well a gateway matches a peer, as routing would choose.
 *
 * @return The length of @a g's longest peers prefix containing @a peer,
 *         0 if @a g has no peers list (it reaches every peer), or -1 if
 *         it cannot serve @a peer (another family, or no prefix
 *         contains it).
 */
int gwsteer_peer_match(struct gateway_spec const *g,
                       struct sockaddr const *peer);

/**
 * @brief The gateways that serve connections to @a peer.
 *
 * @return A mask (bit = the gateway's position in the file) of the
 *         gateways whose gwsteer_peer_match() is the best among all
 *         configured gateways, or 0 if none can serve @a peer.
 */
uint32_t gwsteer_gateways_serving(struct gwsteer_config const *config,
                                  struct sockaddr const *peer);

/**
 * @brief Is @a name a valid network interface name?
 *
 * The kernel's rule (dev_valid_name()): 1 to IFNAMSIZ - 1 bytes, not
 * "." or "..", no '/', ':' or white space; control characters, quotes
 * and backslashes are refused too, since the name ends up in logs and
 * JSON (the status file writes it as it is).
 */
bool gwsteer_valid_ifname(char const *name);

/**
 * @brief Compare the IP addresses (not ports) of two socket addresses.
 *
 * @return @c true if both have the same family and address.
 */
bool gwsteer_same_ip(struct sockaddr const *a, struct sockaddr const *b);

/**
 * @brief Format the IP address of @a sa into @a buf (no port).
 *
 * @return @a buf, or "?" if the family is unknown.
 */
char const *gwsteer_ntop(struct sockaddr const *sa, char *buf, size_t len);

#endif  // GWSTEER_GATEWAY_CONFIG_H
