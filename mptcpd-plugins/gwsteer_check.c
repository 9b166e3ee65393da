// SPDX-License-Identifier: BSD-3-Clause
/**
 * @file gwsteer_check.c
 *
 * @brief gwsteer-check: validate a gateway configuration with the
 *        plugin's own loader, and print what the tools need from it.
 *
 * There is one validator, gateway_config.c, the code the mptcpd plugin
 * runs.  The Python routing helper and CLI do not parse the file: they
 * run this command and read its JSON, so a file is either good for
 * every reader or refused by all of them with the same message.
 *
 * Usage: gwsteer-check [--json] [FILE]
 *   FILE defaults to $BRAID_GWSTEER_CONFIG, else /etc/braid/gateways.conf.
 *   Exit 0: valid ("FILE: ok", or the JSON with --json on stdout);
 *   exit 2: invalid, one line on stderr naming the file, section and
 *   field, or a usage error (every braid tool exits 2 on bad input).
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <ell/ell.h>

#include "gateway_config.h"

/**
 * @brief Print @a s as a JSON string.
 */
static void json_string(char const *s)
{
        putchar('"');
        for (unsigned char const *p = (unsigned char const *) s; *p; ++p) {
                if (*p == '"' || *p == '\\')
                        printf("\\%c", *p);
                else if (*p < 0x20)
                        printf("\\u%04x", *p);
                else
                        putchar(*p);
        }
        putchar('"');
}

/**
 * @brief Print an address as a JSON string, or null if unset.
 */
static void json_addr(struct sockaddr_storage const *ss)
{
        char buf[INET6_ADDRSTRLEN];

        if (ss->ss_family == AF_UNSPEC)
                fputs("null", stdout);
        else
                json_string(gwsteer_ntop((struct sockaddr const *) ss,
                                         buf, sizeof(buf)));
}

/**
 * @brief Print the validated configuration as one JSON object.
 */
static void print_json(char const *path, struct gwsteer_config const *c)
{
        fputs("{\"path\":", stdout);
        json_string(path);
        printf(",\"settings\":{\"role\":\"%s\",\"status_file\":",
               c->role == GWSTEER_ROLE_CLIENT ? "client" : "proxy");
        json_string(c->status_file);
        printf(",\"status_interval_ms\":%u,\"probe_target\":",
               c->status_interval_ms);
        json_addr(&c->probe_target);
        printf(",\"probe_interval_ms\":%u,\"probe_timeout_ms\":%u,"
               "\"fail_after\":%u,\"recover_after\":%u,\"hold_ms\":%u,"
               "\"ewma_alpha\":%.17g,\"prefer_best\":%s,"
               "\"switch_margin\":%.17g,\"max_subflows\":%u,"
               "\"subflow_timeout_ms\":%u,\"stall_ms\":%u,"
               "\"stall_remove\":%s,\"announce\":[",
               c->probe_interval_ms, c->probe_timeout_ms, c->fail_after,
               c->recover_after, c->hold_ms, c->ewma_alpha,
               c->prefer_best ? "true" : "false", c->switch_margin,
               c->max_subflows, c->subflow_timeout_ms, c->stall_ms,
               c->stall_remove ? "true" : "false");

        for (struct l_queue_entry const *e = l_queue_get_entries(c->announce);
             e;
             e = e->next) {
                json_addr(e->data);
                if (e->next)
                        putchar(',');
        }

        printf("],\"route_table_base\":%u,\"rule_priority\":%u},"
               "\"gateways\":[", c->route_table_base, c->rule_priority);

        unsigned int index = 0;

        for (struct l_queue_entry const *e = l_queue_get_entries(c->gateways);
             e;
             e = e->next, ++index) {
                struct gateway_spec const *const g = e->data;

                fputs("{\"id\":", stdout);
                json_string(g->id);
                printf(",\"index\":%u,\"source\":", index);
                json_addr(&g->source);
                fputs(",\"interface\":", stdout);
                if (g->interface[0] != '\0')
                        json_string(g->interface);
                else
                        fputs("null", stdout);
                printf(",\"family\":\"%s\",\"hops\":[",
                       g->family == AF_INET6 ? "ipv6" : "ipv4");
                for (unsigned int i = 0; i < g->hop_count; ++i) {
                        json_addr(&g->hops[i]);
                        if (i + 1 < g->hop_count)
                                putchar(',');
                }
                printf("],\"backup\":%s,\"probe\":",
                       g->backup ? "true" : "false");
                json_addr(&g->probe);
                fputs(",\"peers\":[", stdout);
                for (unsigned int i = 0; i < g->peer_count; ++i) {
                        char buf[INET6_ADDRSTRLEN];

                        printf("\"%s/%u\"%s",
                               gwsteer_ntop((struct sockaddr const *)
                                            &g->peers[i].addr,
                                            buf, sizeof(buf)),
                               g->peers[i].len,
                               i + 1 < g->peer_count ? "," : "");
                }
                printf("],\"route\":\"%s\"",
                       g->route_external ? "external" : "gwsteer");
                fputs(e->next ? "}," : "}", stdout);
        }

        puts("]}");
}

/**
 * @brief Refuse a status file whose directory the plugin will not write.
 *
 * The plugin opens the status file's directory without following a
 * symbolic link and writes nothing into a directory that group or others
 * can write (status_file.c); mptcpd then runs without a status file, and
 * braid-proxy and gwsteer-cli see no gateway state.  Say so before it
 * starts.  A directory that does not exist yet is created (0755).
 *
 * @return true if the directory is missing or one the plugin writes.
 */
static bool status_dir_ok(char const *status_file)
{
        char *const dir = strdup(status_file);
        char *const slash = dir ? strrchr(dir, '/') : NULL;
        struct stat st;
        bool ok = true;

        if (slash == NULL) {
                free(dir);
                return true;
        }
        if (slash == dir)
                slash[1] = '\0';
        else
                *slash = '\0';

        if (lstat(dir, &st) == 0) {
                if (S_ISLNK(st.st_mode)) {
                        fprintf(stderr, "status_file: directory %s is a "
                                "symbolic link; gwsteer writes no status "
                                "file there (name the real directory)\n",
                                dir);
                        ok = false;
                } else if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
                        fprintf(stderr, "status_file: directory %s is "
                                "writable by group or others (mode %03o); "
                                "gwsteer writes no status file there "
                                "(chmod go-w %s)\n",
                                dir, st.st_mode & 0777, dir);
                        ok = false;
                }
        }
        free(dir);
        return ok;
}

#ifndef GWSTEER_VERSION
#define GWSTEER_VERSION "unknown"
#endif

int main(int argc, char **argv)
{
        bool json = false;
        char const *path = NULL;

        for (int i = 1; i < argc; ++i) {
                if (strcmp(argv[i], "--json") == 0)
                        json = true;
                else if (strcmp(argv[i], "--version") == 0) {
                        printf("gwsteer-check %s\n", GWSTEER_VERSION);
                        return 0;
                } else if (strcmp(argv[i], "-h") == 0
                         || strcmp(argv[i], "--help") == 0) {
                        printf("usage: gwsteer-check [--json] [FILE]\n"
                               "       gwsteer-check --version\n\n"
                               "Validate a gwsteer gateway configuration "
                               "with the mptcpd plugin's own loader.\n"
                               "FILE defaults to $%s, else %s.\n"
                               "Exit 0 if valid (--json: print the "
                               "validated settings and gateways),\n"
                               "2 if not (the reason on stderr).\n",
                               GWSTEER_CONFIG_ENV,
                               GWSTEER_DEFAULT_CONFIG_PATH);
                        return 0;
                } else if (argv[i][0] == '-' || path != NULL) {
                        fprintf(stderr, "gwsteer-check: unexpected "
                                "argument '%s' (see --help)\n", argv[i]);
                        return 2;
                } else {
                        path = argv[i];
                }
        }

        if (path == NULL)
                path = getenv(GWSTEER_CONFIG_ENV);
        if (path == NULL || *path == '\0')
                path = GWSTEER_DEFAULT_CONFIG_PATH;

        // Errors go to stderr as bare lines: that is the whole report.
        l_log_set_handler(NULL);
        l_log_set_stderr();

        struct gwsteer_config *const c = gwsteer_config_load(path);

        if (c == NULL)
                return 2;

        if (!status_dir_ok(c->status_file)) {
                gwsteer_config_free(c);
                return 2;
        }

        if (json)
                print_json(path, c);
        else
                printf("%s: ok\n", path);

        gwsteer_config_free(c);
        return 0;
}
