/*
 * cli — the offline administration commands (cache import; tenants, keys and usage),
 * which open the data directory's store themselves. Each returns the process's exit
 * status: 0, 1 on failure, 2 on a usage or configuration error.
 */
#ifndef GW_CLI_H
#define GW_CLI_H

#include "config.h"
#include "store.h"

/* argv[0] is the command's name ("cache"). */
int gw_cli_cache(int argc, char **argv);
int gw_cli_tenant(int argc, char **argv); /* tenant create|set|list|delete */
int gw_cli_key(int argc, char **argv);    /* key create|list|revoke */
int gw_cli_usage(int argc, char **argv);  /* usage [--tenant] [--since] */

/* Loads config (NULL: the default file) with an optional --data-dir override. */
int gw_cli_config(const char *config, const char *data_dir, struct gw_config *cfg);
/* Opens the store of cfg->data_dir; prints why not. */
int gw_cli_open_store(const struct gw_config *cfg, int dim, store **out);

#endif
