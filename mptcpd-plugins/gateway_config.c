// SPDX-License-Identifier: BSD-3-Clause
/**
 * @file gateway_config.c
 *
 * @brief Read and validate the gwsteer gateway configuration.
 *
 * Validation is strict on purpose: a typo in a key or an address that
 * is not an address must stop mptcpd with a message naming the field,
 * not silently run a path manager that steers nothing.  The Python
 * routing helper applies the same rules (gwsteer/config.py), and the
 * test suite feeds both the same bad files.
 */

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ell/ell.h>

#include "gateway_config.h"

/// Prefix of gateway section names, e.g. @c [gateway gw1].
#define GATEWAY_GROUP_PREFIX "gateway "

/// Name of the global section.
#define GLOBAL_GROUP "gwsteer"

/**
 * @brief Kind of value a @c [gwsteer] key holds.
 *
 * Names match the second column of GWSTEER_DEFAULTS().
 */
enum key_type {
        KEY_str,
        KEY_uint,
        KEY_double,
        KEY_bool,
        KEY_role,
        KEY_addr,
        KEY_addrlist
};

/**
 * @struct global_key
 *
 * @brief One known key of the @c [gwsteer] section.
 */
struct global_key
{
        /// Key name.
        char const *name;

        /// Value kind.
        enum key_type type;

        /// Default value, as text, from gwsteer_defaults.h.
        char const *default_value;
};

/// Expand one GWSTEER_DEFAULT() entry into a global_key initializer.
#define GWSTEER_KEY_ENTRY(key, type, def, doc) { #key, KEY_##type, def },

/// All keys of @c [gwsteer], generated from gwsteer_defaults.h.
static struct global_key const global_keys[] = {
        GWSTEER_DEFAULTS(GWSTEER_KEY_ENTRY)
};

/// Keys allowed in a @c [gateway <id>] section.
static char const *const gateway_keys[] = {
        "source", "interface", "family", "hops", "backup", "probe", "peers",
        "route", NULL
};

bool gwsteer_parse_addr(char const *text, struct sockaddr_storage *ss)
{
        memset(ss, 0, sizeof(*ss));

        struct sockaddr_in *const in = (struct sockaddr_in *) ss;
        struct sockaddr_in6 *const in6 = (struct sockaddr_in6 *) ss;

        if (inet_pton(AF_INET, text, &in->sin_addr) == 1) {
                in->sin_family = AF_INET;
                return true;
        }

        memset(ss, 0, sizeof(*ss));
        if (inet_pton(AF_INET6, text, &in6->sin6_addr) == 1) {
                in6->sin6_family = AF_INET6;
                return true;
        }

        return false;
}

/**
 * @brief The address bytes of @a ss, and their number in bits.
 *
 * @return @c NULL if @a ss is neither IPv4 nor IPv6.
 */
static uint8_t const *addr_bytes(struct sockaddr_storage const *ss,
                                 unsigned int *bits)
{
        if (ss->ss_family == AF_INET) {
                *bits = 32;
                return (uint8_t const *)
                        &((struct sockaddr_in const *) ss)->sin_addr;
        }

        if (ss->ss_family == AF_INET6) {
                *bits = 128;
                return ((struct sockaddr_in6 const *) ss)->sin6_addr.s6_addr;
        }

        return NULL;
}

/**
 * @brief Do the first @a len bits of @a a and @a b agree?
 */
static bool same_bits(uint8_t const *a, uint8_t const *b, unsigned int len)
{
        unsigned int const whole = len / 8;
        unsigned int const rest = len % 8;

        if (memcmp(a, b, whole) != 0)
                return false;

        if (rest == 0)
                return true;

        uint8_t const mask = (uint8_t) (0xff << (8 - rest));

        return (a[whole] & mask) == (b[whole] & mask);
}

int gwsteer_peer_match(struct gateway_spec const *g,
                       struct sockaddr const *peer)
{
        struct sockaddr_storage ss = { 0 };
        unsigned int bits = 0;

        if (peer->sa_family != g->family)
                return -1;

        if (g->peer_count == 0)
                return 0;

        memcpy(&ss, peer, peer->sa_family == AF_INET
               ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6));

        uint8_t const *const bytes = addr_bytes(&ss, &bits);
        int best = -1;

        for (unsigned int i = 0; bytes != NULL && i < g->peer_count; ++i) {
                struct gateway_prefix const *const p = &g->peers[i];
                uint8_t const *const prefix = addr_bytes(&p->addr, &bits);

                if (same_bits(prefix, bytes, p->len) && (int) p->len > best)
                        best = (int) p->len;
        }

        return best;
}

uint32_t gwsteer_gateways_serving(struct gwsteer_config const *config,
                                  struct sockaddr const *peer)
{
        int best = -1;
        uint32_t mask = 0;
        unsigned int index = 0;

        for (struct l_queue_entry const *e =
                     l_queue_get_entries(config->gateways);
             e;
             e = e->next, ++index) {
                int const m = gwsteer_peer_match(e->data, peer);

                if (m > best) {
                        best = m;
                        mask = 0;
                }

                if (m == best && m >= 0)
                        mask |= 1u << index;
        }

        return mask;
}

bool gwsteer_valid_ifname(char const *name)
{
        size_t const len = strlen(name);

        if (len == 0 || len >= IF_NAMESIZE
            || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
                return false;

        for (unsigned char const *p = (unsigned char const *) name; *p; ++p)
                if (*p == '/' || *p == ':' || *p == '"' || *p == '\\'
                    || isspace(*p) || iscntrl(*p) || *p >= 0x7f)
                        return false;

        return true;
}

/**
 * @brief Name of an address family as the configuration writes it.
 */
static char const *family_name(sa_family_t family)
{
        return family == AF_INET6 ? "ipv6" : "ipv4";
}

bool gwsteer_same_ip(struct sockaddr const *a, struct sockaddr const *b)
{
        if (a == NULL || b == NULL || a->sa_family != b->sa_family)
                return false;

        if (a->sa_family == AF_INET)
                return ((struct sockaddr_in const *) a)->sin_addr.s_addr
                        == ((struct sockaddr_in const *) b)->sin_addr.s_addr;

        if (a->sa_family == AF_INET6)
                return memcmp(&((struct sockaddr_in6 const *) a)->sin6_addr,
                              &((struct sockaddr_in6 const *) b)->sin6_addr,
                              sizeof(struct in6_addr)) == 0;

        return false;
}

char const *gwsteer_ntop(struct sockaddr const *sa, char *buf, size_t len)
{
        void const *src = NULL;

        if (sa->sa_family == AF_INET)
                src = &((struct sockaddr_in const *) sa)->sin_addr;
        else if (sa->sa_family == AF_INET6)
                src = &((struct sockaddr_in6 const *) sa)->sin6_addr;

        if (src == NULL || inet_ntop(sa->sa_family, src, buf, len) == NULL)
                return "?";

        return buf;
}

/**
 * @brief Strip leading and trailing white space in place.
 *
 * @return Pointer into @a s at the first non-space character.
 */
static char *trim(char *s)
{
        while (isspace((unsigned char) *s))
                ++s;

        char *end = s + strlen(s);
        while (end > s && isspace((unsigned char) end[-1]))
                *--end = '\0';

        return s;
}

/**
 * @brief Parse a non-negative decimal integer that fits an unsigned int.
 */
static bool parse_uint(char const *text, unsigned int *out)
{
        char *end = NULL;

        // Plain ASCII digits only: no sign, no space, no 0x (strtoul
        // would take all three).
        if (*text == '\0' || strspn(text, "0123456789") != strlen(text))
                return false;

        errno = 0;
        unsigned long const v = strtoul(text, &end, 10);
        if (errno != 0 || *end != '\0' || v > 0x7fffffffUL)
                return false;

        *out = (unsigned int) v;
        return true;
}

/**
 * @brief Parse a finite decimal number.
 */
static bool parse_double(char const *text, double *out)
{
        char *end = NULL;
        size_t const whole = strspn(text, "0123456789");

        /*
         * Decimal "12", "0.5" or ".5" only: strtod would also take a
         * sign, hex floats, "inf" and "nan", which no setting needs.
         */
        if (*text == '\0'
            || (text[whole] != '\0'
                && (text[whole] != '.' || text[whole + 1] == '\0'
                    || strspn(text + whole + 1, "0123456789")
                       != strlen(text + whole + 1))))
                return false;

        errno = 0;
        double const v = strtod(text, &end);
        if (errno != 0 || *end != '\0' || v != v)
                return false;

        *out = v;
        return true;
}

/**
 * @brief Parse a boolean the way configparser does.
 */
static bool parse_bool(char const *text, bool *out)
{
        static char const *const yes[] = { "1", "yes", "true", "on", NULL };
        static char const *const no[] = { "0", "no", "false", "off", NULL };

        for (char const *const *w = yes; *w; ++w)
                if (strcasecmp(text, *w) == 0) {
                        *out = true;
                        return true;
                }

        for (char const *const *w = no; *w; ++w)
                if (strcasecmp(text, *w) == 0) {
                        *out = false;
                        return true;
                }

        return false;
}

/**
 * @brief Split a comma-separated list of addresses.
 *
 * @param[in]  text  The list, e.g. "fc00:1::e, fc00:2::d4".
 * @param[out] count Number of addresses parsed.
 * @param[out] bad   Set to the first entry that is not an address.
 *
 * @return A queue of struct sockaddr_storage, or @c NULL with @a bad
 *         set (caller frees @a bad with l_free()).
 */
static struct l_queue *parse_addr_list(char const *text,
                                       unsigned int *count,
                                       char **bad)
{
        struct l_queue *const list = l_queue_new();
        char **parts = l_strsplit(text, ',');

        *count = 0;
        *bad = NULL;

        for (char **p = parts; p && *p; ++p) {
                char *const item = trim(*p);

                if (*item == '\0' && p == parts && p[1] == NULL)
                        break;  // An empty list.

                struct sockaddr_storage *const ss =
                        l_new(struct sockaddr_storage, 1);

                if (*item == '\0' || !gwsteer_parse_addr(item, ss)) {
                        l_free(ss);
                        *bad = l_strdup(item);
                        l_queue_destroy(list, l_free);
                        l_strfreev(parts);
                        return NULL;
                }

                l_queue_push_tail(list, ss);
                ++*count;
        }

        l_strfreev(parts);
        return list;
}

/**
 * @brief Parse "10.200.0.1/32", "fd00::/64" or a bare address (a host).
 *
 * @return @c false if it is not a prefix, or has bits set past its
 *         length (iproute2 refuses those as well: the writer meant
 *         another prefix, or a host).
 */
static bool parse_prefix(char *text, struct gateway_prefix *p)
{
        char *const slash = strchr(text, '/');
        unsigned int bits = 0;
        unsigned int len = 0;

        if (slash != NULL)
                *slash = '\0';

        bool const ok = gwsteer_parse_addr(text, &p->addr);

        if (slash != NULL)
                *slash = '/';

        uint8_t const *const bytes = ok ? addr_bytes(&p->addr, &bits) : NULL;

        if (bytes == NULL)
                return false;

        if (slash == NULL)
                len = bits;
        else if (!parse_uint(slash + 1, &len) || len > bits)
                return false;

        p->len = len;

        for (unsigned int i = len; i < bits; ++i)
                if (bytes[i / 8] & (0x80 >> (i % 8)))
                        return false;

        return true;
}

/**
 * @brief Is @a name a known key of @a keys (a NULL-terminated list)?
 */
static bool key_known(char const *const *keys, char const *name)
{
        for (; *keys; ++keys)
                if (strcmp(*keys, name) == 0)
                        return true;

        return false;
}

/**
 * @brief Get the trimmed value of a key, or @c NULL if absent.
 *
 * @return A string to free with l_free().
 */
static char *get_trimmed(struct l_settings const *s,
                         char const *group,
                         char const *key)
{
        char const *const raw = l_settings_get_value(s, group, key);

        if (raw == NULL)
                return NULL;

        char *const copy = l_strdup(raw);
        char *const t = trim(copy);
        memmove(copy, t, strlen(t) + 1);

        return copy;
}

/**
 * @brief Store one @c [gwsteer] value into @a config.
 *
 * @return @c false after logging an error naming the key.
 */
static bool apply_global(struct gwsteer_config *config,
                         char const *path,
                         struct global_key const *key,
                         char const *value)
{
        bool ok = true;
        unsigned int u = 0;
        double d = 0;
        bool b = false;

        switch (key->type) {
        case KEY_uint:
                ok = parse_uint(value, &u);
                break;
        case KEY_double:
                ok = parse_double(value, &d);
                break;
        case KEY_bool:
                ok = parse_bool(value, &b);
                break;
        default:
                break;
        }

        if (!ok) {
                l_error("%s: [%s] %s: '%s' is not a valid %s",
                        path, GLOBAL_GROUP, key->name, value,
                        key->type == KEY_uint ? "non-negative integer"
                        : key->type == KEY_double ? "number" : "boolean");
                return false;
        }

        char const *const n = key->name;

        if (strcmp(n, "role") == 0) {
                if (strcmp(value, "client") == 0)
                        config->role = GWSTEER_ROLE_CLIENT;
                else if (strcmp(value, "proxy") == 0)
                        config->role = GWSTEER_ROLE_PROXY;
                else {
                        l_error("%s: [%s] role: '%s' is not client or proxy",
                                path, GLOBAL_GROUP, value);
                        return false;
                }
        } else if (strcmp(n, "status_file") == 0) {
                size_t const len = strlen(value);

                if (value[0] != '/' || value[len - 1] == '/') {
                        l_error("%s: [%s] status_file: '%s' is not an "
                                "absolute path to a file", path, GLOBAL_GROUP,
                                value);
                        return false;
                }
                l_free(config->status_file);
                config->status_file = l_strdup(value);
        } else if (strcmp(n, "probe_target") == 0) {
                memset(&config->probe_target, 0,
                       sizeof(config->probe_target));
                if (*value != '\0'
                    && !gwsteer_parse_addr(value, &config->probe_target)) {
                        l_error("%s: [%s] probe_target: '%s' is not an IP "
                                "address", path, GLOBAL_GROUP, value);
                        return false;
                }
        } else if (strcmp(n, "announce") == 0) {
                unsigned int count = 0;
                char *bad = NULL;
                struct l_queue *const list =
                        parse_addr_list(value, &count, &bad);

                if (list == NULL) {
                        l_error("%s: [%s] announce: '%s' is not an IP "
                                "address", path, GLOBAL_GROUP, bad);
                        l_free(bad);
                        return false;
                }
                l_queue_destroy(config->announce, l_free);
                config->announce = list;
        } else if (strcmp(n, "status_interval_ms") == 0)
                config->status_interval_ms = u;
        else if (strcmp(n, "probe_interval_ms") == 0)
                config->probe_interval_ms = u;
        else if (strcmp(n, "probe_timeout_ms") == 0)
                config->probe_timeout_ms = u;
        else if (strcmp(n, "fail_after") == 0)
                config->fail_after = u;
        else if (strcmp(n, "recover_after") == 0)
                config->recover_after = u;
        else if (strcmp(n, "hold_ms") == 0)
                config->hold_ms = u;
        else if (strcmp(n, "max_subflows") == 0)
                config->max_subflows = u;
        else if (strcmp(n, "subflow_timeout_ms") == 0)
                config->subflow_timeout_ms = u;
        else if (strcmp(n, "stall_ms") == 0)
                config->stall_ms = u;
        else if (strcmp(n, "stall_remove") == 0)
                config->stall_remove = b;
        else if (strcmp(n, "ewma_alpha") == 0)
                config->ewma_alpha = d;
        else if (strcmp(n, "switch_margin") == 0)
                config->switch_margin = d;
        else if (strcmp(n, "prefer_best") == 0)
                config->prefer_best = b;
        else if (strcmp(n, "route_table_base") == 0)
                config->route_table_base = u;
        else if (strcmp(n, "rule_priority") == 0)
                config->rule_priority = u;

        return true;
}

/**
 * @brief Check ranges that a single value cannot express.
 */
static bool check_global_ranges(struct gwsteer_config const *c,
                                char const *path)
{
        struct {
                char const *name;
                unsigned int value;
        } const positive[] = {
                { "status_interval_ms", c->status_interval_ms },
                { "probe_interval_ms",  c->probe_interval_ms },
                { "probe_timeout_ms",   c->probe_timeout_ms },
                { "fail_after",         c->fail_after },
                { "recover_after",      c->recover_after },
                { "max_subflows",       c->max_subflows },
                { "subflow_timeout_ms", c->subflow_timeout_ms },
        };

        for (size_t i = 0; i < L_ARRAY_SIZE(positive); ++i)
                if (positive[i].value == 0) {
                        l_error("%s: [%s] %s: must be greater than 0",
                                path, GLOBAL_GROUP, positive[i].name);
                        return false;
                }

        if (!(c->ewma_alpha >= 0 && c->ewma_alpha < 1)) {
                l_error("%s: [%s] ewma_alpha: must be in [0, 1)",
                        path, GLOBAL_GROUP);
                return false;
        }

        if (!(c->switch_margin >= 0 && c->switch_margin <= 1)) {
                l_error("%s: [%s] switch_margin: must be in [0, 1]",
                        path, GLOBAL_GROUP);
                return false;
        }

        /*
         * Each gateway has GWSTEER_ROUND_SLOTS probes in flight at most;
         * a timeout of that many intervals would drop rounds unseen.
         */
        if ((uint64_t) c->probe_timeout_ms
            >= (uint64_t) GWSTEER_ROUND_SLOTS * c->probe_interval_ms) {
                l_error("%s: [%s] probe_timeout_ms: must be less than %d x "
                        "probe_interval_ms (%u)", path, GLOBAL_GROUP,
                        GWSTEER_ROUND_SLOTS,
                        GWSTEER_ROUND_SLOTS * c->probe_interval_ms);
                return false;
        }

        if (l_queue_length(c->announce) > GWSTEER_MAX_GATEWAYS) {
                l_error("%s: [%s] announce: at most %d addresses",
                        path, GLOBAL_GROUP, GWSTEER_MAX_GATEWAYS);
                return false;
        }

        if (c->max_subflows > GWSTEER_MAX_GATEWAYS) {
                l_error("%s: [%s] max_subflows: must be at most %d",
                        path, GLOBAL_GROUP, GWSTEER_MAX_GATEWAYS);
                return false;
        }

        return true;
}

/**
 * @brief Read the @c [gwsteer] section, falling back to the defaults.
 */
static bool load_global(struct gwsteer_config *config,
                        struct l_settings const *s,
                        char const *path)
{
        if (l_settings_has_group(s, GLOBAL_GROUP)) {
                char **const keys = l_settings_get_keys(s, GLOBAL_GROUP);
                bool ok = true;

                for (char **k = keys; ok && k && *k; ++k) {
                        bool known = false;

                        for (size_t i = 0; i < L_ARRAY_SIZE(global_keys); ++i)
                                known |= strcmp(global_keys[i].name, *k) == 0;

                        if (!known) {
                                l_error("%s: [%s] %s: unknown key",
                                        path, GLOBAL_GROUP, *k);
                                ok = false;
                        }
                }

                l_strfreev(keys);
                if (!ok)
                        return false;
        }

        for (size_t i = 0; i < L_ARRAY_SIZE(global_keys); ++i) {
                struct global_key const *const key = &global_keys[i];
                char *const given = get_trimmed(s, GLOBAL_GROUP, key->name);
                bool const ok = apply_global(config, path, key,
                                             given ? given
                                                   : key->default_value);

                l_free(given);
                if (!ok)
                        return false;
        }

        return check_global_ranges(config, path);
}

/**
 * @brief Is @a id a usable gateway identifier?
 *
 * Identifiers end up in JSON, in log lines and in routing table
 * names, so they are restricted to a safe character set.
 */
static bool valid_gateway_id(char const *id)
{
        size_t const len = strlen(id);

        if (len == 0 || len > GWSTEER_MAX_ID_LEN)
                return false;

        for (char const *p = id; *p; ++p)
                if (!isalnum((unsigned char) *p)
                    && *p != '-' && *p != '_' && *p != '.')
                        return false;

        return true;
}

/**
 * @brief Validate the hop list of a gateway against its source.
 *
 * One hop of the source's family is an on-link next hop (policy
 * routing); anything else is an SRv6 segment list, whose segments
 * must all be IPv6.
 */
static bool check_hops(struct gateway_spec const *g,
                       struct l_queue *hops,
                       char const *path)
{
        struct sockaddr_storage const *const first = l_queue_peek_head(hops);

        if (l_queue_length(hops) == 1
            && first->ss_family == g->family)
                return true;

        for (struct l_queue_entry const *e = l_queue_get_entries(hops);
             e;
             e = e->next) {
                struct sockaddr_storage const *const hop = e->data;
                char buf[INET6_ADDRSTRLEN];

                if (hop->ss_family != AF_INET6) {
                        l_error("%s: [gateway %s] hops: '%s' is not an IPv6 "
                                "SRv6 segment (a multi-hop or cross-family "
                                "list is an SRv6 segment list)",
                                path, g->id,
                                gwsteer_ntop((struct sockaddr const *) hop,
                                             buf, sizeof(buf)));
                        return false;
                }
        }

        return true;
}

/**
 * @brief Read a gateway's @c peers list into @a g.
 *
 * @return @c false after logging which entry is bad.
 */
static bool load_peers(struct gateway_spec *g, char const *text,
                       char const *path, char const *group)
{
        char **const parts = l_strsplit(text, ',');
        bool ok = true;

        g->peer_count = 0;
        for (char **p = parts; ok && p && *p; ++p) {
                char *const item = trim(*p);
                struct gateway_prefix prefix;

                if (g->peer_count == GWSTEER_MAX_PEERS) {
                        l_error("%s: [%s] peers: at most %d prefixes",
                                path, group, GWSTEER_MAX_PEERS);
                        ok = false;
                } else if (!parse_prefix(item, &prefix)) {
                        l_error("%s: [%s] peers: '%s' is not an address "
                                "or a prefix such as 10.200.0.1/32 (no "
                                "bits set past its length)",
                                path, group, item);
                        ok = false;
                } else if (prefix.addr.ss_family != g->family) {
                        l_error("%s: [%s] peers: '%s' is not of the "
                                "family of the gateway: it cannot "
                                "reach it", path, group, item);
                        ok = false;
                } else {
                        g->peers[g->peer_count++] = prefix;
                }
        }

        if (ok && g->peer_count == 0) {
                l_error("%s: [%s] peers: empty (leave the key out for "
                        "a gateway that reaches every peer)", path, group);
                ok = false;
        }

        l_strfreev(parts);
        return ok;
}

/**
 * @brief Settle the family of gateway @a g.
 *
 * A source address has its family; a gateway named by its interface
 * alone takes @c family =, else the family of its probe target (the
 * interface has addresses of both families, the gateway uses one).
 *
 * @return @c false after logging a missing or conflicting family.
 */
static bool load_family(struct gateway_spec *g,
                        struct gwsteer_config const *config,
                        char const *family,
                        char const *probe,
                        char const *path,
                        char const *group)
{
        sa_family_t named = AF_UNSPEC;
        struct sockaddr_storage target = { 0 };

        if (family != NULL && strcmp(family, "ipv4") == 0)
                named = AF_INET;
        else if (family != NULL && strcmp(family, "ipv6") == 0)
                named = AF_INET6;
        else if (family != NULL) {
                l_error("%s: [%s] family: '%s' is neither ipv4 nor ipv6",
                        path, group, family);
                return false;
        }

        if (g->source.ss_family != AF_UNSPEC) {
                if (named != AF_UNSPEC && named != g->source.ss_family) {
                        char buf[INET6_ADDRSTRLEN];

                        l_error("%s: [%s] family: %s does not agree with "
                                "source %s (an %s address)", path, group,
                                family, gwsteer_ntop((struct sockaddr *)
                                                     &g->source,
                                                     buf, sizeof(buf)),
                                family_name(g->source.ss_family));
                        return false;
                }
                g->family = g->source.ss_family;
                return true;
        }

        if (named == AF_UNSPEC && probe != NULL && *probe != '\0'
            && gwsteer_parse_addr(probe, &target))
                named = target.ss_family;
        else if (named == AF_UNSPEC)
                named = config->probe_target.ss_family;

        if (named == AF_UNSPEC) {
                l_error("%s: [%s] family: missing (a gateway named by its "
                        "interface alone needs family = ipv4 or ipv6, or a "
                        "probe target of that family)", path, group);
                return false;
        }

        g->family = named;
        return true;
}

/**
 * @brief Read one @c [gateway <id>] section.
 *
 * @return The gateway, or @c NULL after logging which field is bad.
 */
static struct gateway_spec *load_gateway(struct gwsteer_config const *config,
                                         struct l_settings const *s,
                                         char const *group,
                                         char const *path)
{
        char const *const id = group + strlen(GATEWAY_GROUP_PREFIX);

        if (!valid_gateway_id(id)) {
                l_error("%s: [%s]: gateway id '%s' must be 1-%d characters "
                        "of A-Z a-z 0-9 - _ .", path, group, id,
                        GWSTEER_MAX_ID_LEN);
                return NULL;
        }

        char **const keys = l_settings_get_keys(s, group);
        bool ok = true;

        for (char **k = keys; ok && k && *k; ++k)
                if (!key_known(gateway_keys, *k)) {
                        l_error("%s: [%s] %s: unknown key", path, group, *k);
                        ok = false;
                }

        l_strfreev(keys);
        if (!ok)
                return NULL;

        struct gateway_spec *const g = l_new(struct gateway_spec, 1);
        l_strlcpy(g->id, id, sizeof(g->id));

        char *const source = get_trimmed(s, group, "source");
        char *const interface = get_trimmed(s, group, "interface");
        char *const family = get_trimmed(s, group, "family");
        char *const hops = get_trimmed(s, group, "hops");
        char *const backup = get_trimmed(s, group, "backup");
        char *const probe = get_trimmed(s, group, "probe");
        char *const peers = get_trimmed(s, group, "peers");
        char *const route = get_trimmed(s, group, "route");
        struct l_queue *hop_list = NULL;
        char *bad = NULL;

        ok = false;

        bool const has_source = source != NULL && *source != '\0';

        if (hops == NULL)
                hop_list = l_queue_new();  // Interface: the routing table's.

        bool const has_interface = interface != NULL && *interface != '\0';

        if (!has_source && !has_interface)
                l_error("%s: [%s] source: missing (a source address, or "
                        "interface = the device whose address the gateway "
                        "follows)", path, group);
        else if (has_source && !gwsteer_parse_addr(source, &g->source))
                l_error("%s: [%s] source: '%s' is not an IP address",
                        path, group, source);
        else if (interface != NULL && !gwsteer_valid_ifname(interface))
                l_error("%s: [%s] interface: '%s' is not a valid interface "
                        "name (1-%d characters, not . or .., no '/', ':', "
                        "quotes, backslashes or white space)", path, group,
                        interface,
                        IF_NAMESIZE - 1);
        else if (!load_family(g, config, family, probe, path, group))
                ;  // Already logged.
        else if (!has_interface && (hops == NULL || *hops == '\0'))
                l_error("%s: [%s] hops: missing (a next hop, or an SRv6 "
                        "segment list ending at the gateway)", path, group);
        else if (hops != NULL && *hops == '\0')
                l_error("%s: [%s] hops: empty (leave the key out to take "
                        "the next hop from %s's default route)",
                        path, group, interface);
        else if (hops != NULL
                 && (hop_list = parse_addr_list(hops, &g->hop_count, &bad))
                    == NULL)
                l_error("%s: [%s] hops: '%s' is not an IP address",
                        path, group, bad);
        else if (g->hop_count > GWSTEER_MAX_HOPS)
                l_error("%s: [%s] hops: at most %d entries", path, group,
                        GWSTEER_MAX_HOPS);
        else if (g->hop_count > 0 && !check_hops(g, hop_list, path))
                ;  // Already logged.
        else if (backup != NULL && !parse_bool(backup, &g->backup))
                l_error("%s: [%s] backup: '%s' is not a boolean",
                        path, group, backup);
        else if (probe != NULL && *probe != '\0'
                 && !gwsteer_parse_addr(probe, &g->probe))
                l_error("%s: [%s] probe: '%s' is not an IP address",
                        path, group, probe);
        else if (peers != NULL && config->role == GWSTEER_ROLE_PROXY)
                l_error("%s: [%s] peers: only a client's gateways open "
                        "subflows to peers (role = proxy)", path, group);
        else if (peers != NULL && !load_peers(g, peers, path, group))
                ;  // Already logged.
        else if (route != NULL && strcmp(route, "external") != 0
                 && strcmp(route, "gwsteer") != 0)
                l_error("%s: [%s] route: '%s' is neither gwsteer (gwsteer-"
                        "route installs it) nor external (another tool, "
                        "such as a tunnel's hook, routes source)",
                        path, group, route);
        else
                ok = true;

        g->route_external = route != NULL && strcmp(route, "external") == 0;

        if (ok && interface != NULL)
                l_strlcpy(g->interface, interface, sizeof(g->interface));

        if (ok) {
                unsigned int i = 0;

                for (struct l_queue_entry const *e =
                             l_queue_get_entries(hop_list);
                     e;
                     e = e->next)
                        g->hops[i++] = *(struct sockaddr_storage *) e->data;
        }

        if (ok && g->probe.ss_family == AF_UNSPEC) {
                struct sockaddr_storage const *const hop =
                        l_queue_peek_head(hop_list);

                /*
                 * Without an explicit target, probe the default target
                 * if it has the right family, else the on-link next
                 * hop, which at least proves the gateway is alive.
                 */
                if (config->probe_target.ss_family == g->family)
                        g->probe = config->probe_target;
                else if (g->hop_count == 1
                         && hop->ss_family == g->family)
                        g->probe = *hop;
        }

        if (ok && g->probe.ss_family != g->family) {
                l_error("%s: [%s] probe: missing or not of the gateway's "
                        "family, %s (set probe= or [%s] probe_target=)",
                        path, group, family_name(g->family), GLOBAL_GROUP);
                ok = false;
        }

        l_free(source);
        l_free(interface);
        l_free(family);
        l_free(hops);
        l_free(backup);
        l_free(probe);
        l_free(peers);
        l_free(route);
        l_free(bad);
        l_queue_destroy(hop_list, l_free);

        if (!ok) {
                l_free(g);
                return NULL;
        }

        return g;
}

/**
 * @brief Read every section; reject unknown and duplicate ones.
 */
static bool load_gateways(struct gwsteer_config *config,
                          struct l_settings const *s,
                          char const *path)
{
        char **const groups = l_settings_get_groups(s);
        bool ok = true;

        for (char **g = groups; ok && g && *g; ++g) {
                // ELL keeps duplicate groups; reject them here: only the
                // first would be read, the rest ignored unchecked.
                for (char **prev = groups; prev != g; ++prev)
                        if (strcmp(*prev, *g) == 0) {
                                l_error("%s: [%s]: duplicate %s", path,
                                        *g, strcmp(*g, GLOBAL_GROUP) == 0 ?
                                        "section" : "gateway id");
                                ok = false;
                        }

                if (!ok)
                        break;

                if (strcmp(*g, GLOBAL_GROUP) == 0)
                        continue;

                if (strncmp(*g, GATEWAY_GROUP_PREFIX,
                            strlen(GATEWAY_GROUP_PREFIX)) != 0) {
                        l_error("%s: [%s]: unknown section (expected "
                                "[%s] or [gateway <id>])", path, *g,
                                GLOBAL_GROUP);
                        ok = false;
                        break;
                }

                struct gateway_spec *const gw =
                        load_gateway(config, s, *g, path);

                if (gw == NULL) {
                        ok = false;
                        break;
                }

                for (struct l_queue_entry const *e =
                             l_queue_get_entries(config->gateways);
                     e;
                     e = e->next) {
                        struct gateway_spec const *const other = e->data;
                        char buf[INET6_ADDRSTRLEN];

                        if (gwsteer_same_ip(
                                    (struct sockaddr const *) &other->source,
                                    (struct sockaddr const *) &gw->source)) {
                                l_error("%s: [%s] source: %s is already the "
                                        "source of gateway %s", path, *g,
                                        gwsteer_ntop((struct sockaddr const *)
                                                     &gw->source,
                                                     buf, sizeof(buf)),
                                        other->id);
                                ok = false;
                        }
                }

                for (struct l_queue_entry const *e =
                             l_queue_get_entries(config->gateways);
                     ok && e;
                     e = e->next) {
                        struct gateway_spec const *const other = e->data;

                        /*
                         * Two gateways following one interface and
                         * family would both claim its address.
                         */
                        if (gw->interface[0] != '\0'
                            && other->family == gw->family
                            && strcmp(other->interface, gw->interface) == 0
                            && (gw->source.ss_family == AF_UNSPEC
                                || other->source.ss_family == AF_UNSPEC)) {
                                l_error("%s: [%s] interface: %s (%s) is "
                                        "already followed by gateway %s",
                                        path, *g, gw->interface,
                                        family_name(gw->family), other->id);
                                ok = false;
                        }
                }

                if (!ok) {
                        l_free(gw);
                        break;
                }

                l_queue_push_tail(config->gateways, gw);
        }

        l_strfreev(groups);

        if (ok && l_queue_length(config->gateways) > GWSTEER_MAX_GATEWAYS) {
                l_error("%s: at most %d gateways are supported",
                        path, GWSTEER_MAX_GATEWAYS);
                ok = false;
        }

        if (ok && config->role == GWSTEER_ROLE_CLIENT
            && l_queue_isempty(config->gateways)) {
                l_error("%s: role client needs at least one "
                        "[gateway <id>] section", path);
                ok = false;
        }

        return ok;
}

/**
 * @brief l_queue_find() match: equal strings.
 */
static bool str_match(void const *a, void const *b)
{
        return strcmp(a, b) == 0;
}

/**
 * @brief Check what ELL's parser accepts silently or refuses vaguely.
 *
 * l_settings keeps one of two values given for the same key without a
 * word, and refuses a continuation line without saying which; both
 * are named here, with the line number.
 */
static bool prescan(char const *path)
{
        FILE *const f = fopen(path, "re");
        char line[1024];
        char section[128] = "";
        struct l_queue *const keys = l_queue_new();
        unsigned int n = 0;
        bool ok = true;

        if (f == NULL)
                return true;  // l_settings reports it.

        while (ok && fgets(line, sizeof(line), f) != NULL) {
                char *const t = trim(line);

                ++n;
                if (*t == '\0' || *t == '#')
                        continue;

                if (isspace((unsigned char) line[0])) {
                        l_error("%s: line %u: continuation lines are not "
                                "supported (one key = value per line)",
                                path, n);
                        ok = false;
                } else if (*t == '[') {
                        l_strlcpy(section, t, sizeof(section));
                        l_queue_clear(keys, l_free);
                } else {
                        char *const eq = strchr(t, '=');

                        if (eq == NULL)
                                continue;  // l_settings reports it.

                        *eq = '\0';
                        char *const key = trim(t);

                        if (l_queue_find(keys, str_match, key) != NULL) {
                                l_error("%s: %s %s: set twice (line %u)",
                                        path, section, key, n);
                                ok = false;
                        } else {
                                l_queue_push_tail(keys, l_strdup(key));
                        }
                }
        }

        l_queue_destroy(keys, l_free);
        fclose(f);

        return ok;
}

struct gwsteer_config *gwsteer_config_load(char const *path)
{
        if (!prescan(path))
                return NULL;

        struct l_settings *const s = l_settings_new();

        if (!l_settings_load_from_file(s, path)) {
                l_error("%s: cannot read or parse the configuration file",
                        path);
                l_settings_free(s);
                return NULL;
        }

        struct gwsteer_config *const config = l_new(struct gwsteer_config, 1);
        config->announce = l_queue_new();
        config->gateways = l_queue_new();

        bool const ok = load_global(config, s, path)
                && load_gateways(config, s, path);

        l_settings_free(s);

        if (!ok) {
                gwsteer_config_free(config);
                return NULL;
        }

        return config;
}

void gwsteer_config_free(struct gwsteer_config *config)
{
        if (config == NULL)
                return;

        l_free(config->status_file);
        l_queue_destroy(config->announce, l_free);
        l_queue_destroy(config->gateways, l_free);
        l_free(config);
}
