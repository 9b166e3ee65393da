// SPDX-License-Identifier: BSD-3-Clause
/**
 * @file gwsteer_defaults.h
 *
 * @brief The one source of truth for gwsteer configuration defaults.
 *
 * Every key of the @c [gwsteer] section of the gateway configuration
 * file is listed here exactly once, with its type, its default and a
 * one-line reason.  The C plugin expands the list with an X-macro; the
 * Python routing helper and CLI (gwsteer/config.py) parse this very
 * file, so the two can never disagree about a default.
 *
 * Keep one entry per line, in the form
 * GWSTEER_DEFAULT(key, type, "default", "doc"): the Python side reads
 * it with a regular expression.  Types: str, uint, double, bool, role, addr,
 * addrlist.
 */

#ifndef GWSTEER_DEFAULTS_H
#define GWSTEER_DEFAULTS_H

/// Configuration file read when BRAID_GWSTEER_CONFIG is not set.
#define GWSTEER_DEFAULT_CONFIG_PATH "/etc/braid/gateways.conf"

/// Environment variable naming the configuration file.
#define GWSTEER_CONFIG_ENV "BRAID_GWSTEER_CONFIG"

/// Largest number of gateways (one bit each in a per-connection mask).
#define GWSTEER_MAX_GATEWAYS 32

/// Longest gateway identifier, without the terminating NUL.
#define GWSTEER_MAX_ID_LEN 31

/// Longest hop list (SRv6 segments) of one gateway.
#define GWSTEER_MAX_HOPS 16

/// Most peer prefixes one gateway may be limited to (peers = ...).
#define GWSTEER_MAX_PEERS 8

/// Probe rounds in flight per gateway: probe_timeout_ms must stay below
/// this many probe intervals.
#define GWSTEER_ROUND_SLOTS 16

#define GWSTEER_DEFAULTS(GWSTEER_DEFAULT) \
GWSTEER_DEFAULT(role, role, "client", "client: one subflow per healthy gateway; proxy: announce and accept joins") \
GWSTEER_DEFAULT(status_file, str, "/run/braid/gateways.json", "JSON gateway state read by braid-proxy and gwsteer-cli") \
GWSTEER_DEFAULT(status_interval_ms, uint, "1000", "rewrite the status file at least this often so EWMAs stay fresh") \
GWSTEER_DEFAULT(probe_target, addr, "", "default ICMP echo target of every gateway (usually the proxy); per-gateway probe= overrides") \
GWSTEER_DEFAULT(probe_interval_ms, uint, "200", "one 64-byte echo per gateway per interval: cheap, and detection stays under a second") \
GWSTEER_DEFAULT(probe_timeout_ms, uint, "500", "an echo unanswered this long counts as lost (a few RTTs of a slow uplink); must be under 16 x probe_interval_ms") \
GWSTEER_DEFAULT(fail_after, uint, "3", "consecutive lost probes before a gateway is declared down (one loss is noise)") \
GWSTEER_DEFAULT(recover_after, uint, "3", "consecutive answered probes before a down gateway is used again") \
GWSTEER_DEFAULT(hold_ms, uint, "1000", "minimum time down before coming back; doubles for each flap, up to 16x") \
GWSTEER_DEFAULT(ewma_alpha, double, "0.9", "EWMA weight of history (AvMet alpha); 0.9 at 200 ms probes remembers ~2 s") \
GWSTEER_DEFAULT(prefer_best, bool, "false", "if true only the best gateway (AvMet score) serving a connection's peer is non-backup on it") \
GWSTEER_DEFAULT(switch_margin, double, "0.2", "a challenger must beat the current best AvMet score by this much") \
GWSTEER_DEFAULT(max_subflows, uint, "8", "subflows per connection, the initial one included (client: opened, preferred gateways first; proxy: kept, later joins closed)") \
GWSTEER_DEFAULT(subflow_timeout_ms, uint, "3000", "a requested subflow not up by then is retried and triggers a probe") \
GWSTEER_DEFAULT(stall_ms, uint, "0", "client: a subflow with data unacknowledged this long (and 2 RTTs) gets no new data (backup flag) until acknowledged again; 0: off") \
GWSTEER_DEFAULT(stall_remove, bool, "false", "client: remove a stalled subflow instead (the kernel re-sends the connection's unacknowledged data at once): an earlier detection than fail_after probes") \
GWSTEER_DEFAULT(announce, addrlist, "", "proxy: extra local addresses announced with ADD_ADDR on every connection") \
GWSTEER_DEFAULT(route_table_base, uint, "1000", "routing helper: gateway k (file order, from 0) gets routing table base+k") \
GWSTEER_DEFAULT(rule_priority, uint, "1000", "routing helper: priority of the from-source rules (before main at 32766)")

#endif  // GWSTEER_DEFAULTS_H
