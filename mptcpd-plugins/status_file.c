// SPDX-License-Identifier: BSD-3-Clause
/**
 * @file status_file.c
 *
 * @brief Machine-readable gateway state for braid-proxy and the CLI.
 *
 * Readers poll the file, so it must never be seen half written: it is
 * written to a temporary file in the same directory and renamed over
 * the old one, which is atomic on POSIX file systems.
 */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <ell/ell.h>

#include "gateway_config.h"
#include "gateway_health.h"
#include "status_file.h"

/**
 * @brief Format @a ts as RFC 3339 UTC with milliseconds.
 */
static void format_rfc3339(struct timespec const *ts, char *buf, size_t len)
{
        struct tm tm;
        char base[24];

        gmtime_r(&ts->tv_sec, &tm);
        strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(buf, len, "%s.%03uZ", base,
                 (unsigned int) (ts->tv_nsec / 1000000) % 1000u);
}

/**
 * @brief Create the parent directory of @a path (one level) if needed.
 */
static void ensure_parent_dir(char const *path)
{
        char *const dir = l_strdup(path);
        char *const slash = strrchr(dir, '/');

        if (slash != NULL && slash != dir) {
                *slash = '\0';
                if (mkdir(dir, 0755) != 0 && errno != EEXIST)
                        l_debug("mkdir %s: %s", dir, strerror(errno));
        }

        l_free(dir);
}

/**
 * @brief Append one gateway object to @a out.
 */
static void append_gateway(struct l_string *out,
                           struct gateway_health const *h,
                           struct gateway const *gw,
                           bool first)
{
        char source[INET6_ADDRSTRLEN];
        char changed[40];

        gwsteer_ntop((struct sockaddr const *) &gw->spec->source,
                     source, sizeof(source));
        format_rfc3339(&gw->last_change, changed, sizeof(changed));

        l_string_append_printf(out,
                               "%s{\"id\":\"%s\",\"source\":\"%s\","
                               "\"up\":%s,\"backup\":%s,\"best\":%s,",
                               first ? "" : ",",
                               gw->spec->id, source,
                               gw->up ? "true" : "false",
                               gateway_health_is_backup(h, gw)
                               ? "true" : "false",
                               gateway_health_best(h) == gw
                               ? "true" : "false");

        if (gw->has_rtt)
                l_string_append_printf(out,
                                       "\"ewma_ms\":%.3f,\"rtt_ms\":%.3f,",
                                       gw->ewma_ms, gw->rtt_ms);
        else
                l_string_append(out, "\"ewma_ms\":null,\"rtt_ms\":null,");

        // The AvMet score that elects the best gateway (prefer_best).
        l_string_append_printf(out, "\"avmet\":%.3f,", gw->avmet);

        l_string_append_printf(out,
                               "\"last_change\":\"%s\",\"subflows\":%u}",
                               changed, gw->subflows);
}

bool status_file_write(char const *path, struct gateway_health const *h)
{
        struct l_string *const out = l_string_new(512);
        struct timespec now;
        char updated[40];
        bool first = true;

        clock_gettime(CLOCK_REALTIME, &now);
        format_rfc3339(&now, updated, sizeof(updated));

        l_string_append_printf(out,
                               "{\"version\":1,\"updated\":\"%s\","
                               "\"gateways\":[",
                               updated);

        for (struct l_queue_entry const *e =
                     l_queue_get_entries(gateway_health_gateways(h));
             e;
             e = e->next) {
                append_gateway(out, h, e->data, first);
                first = false;
        }

        l_string_append(out, "]}\n");

        unsigned int len = 0;
        char *const text = l_string_unwrap(out);
        len = (unsigned int) strlen(text);

        char *const tmp = l_strdup_printf("%s.tmp", path);
        bool ok = false;

        ensure_parent_dir(path);

        int const fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
                            0644);
        if (fd >= 0) {
                // fchmod: the umask must not make the file unreadable.
                ok = fchmod(fd, 0644) == 0
                        && write(fd, text, len) == (ssize_t) len;
                ok = close(fd) == 0 && ok;
                ok = ok && rename(tmp, path) == 0;
        }

        if (!ok) {
                l_error("status file %s: %s", path, strerror(errno));
                (void) unlink(tmp);
        }

        l_free(tmp);
        l_free(text);

        return ok;
}
