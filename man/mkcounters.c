/*
 * Writes the counter lists as mdoc for corral(8), so the manual lists
 * exactly what corral -s prints: the store's (shm/store_counters.h), or
 * with the argument "server" the server's (shm/stats.h).
 */
#include <stdio.h>
#include <string.h>

#include "shm/stats.h"
#include "shm/store_counters.h"

/* The server's counters, by their Prometheus names. */
static void
server_counters(void)
{
	static const struct {
		const char *metric, *kind, *label, *help;
	} rows[] = {
#define STATS_X_DOC(id, kind, group, key, metric, label, help) \
		{ metric, #kind, label, help },
		STATS_WORKER(STATS_X_DOC)
#undef STATS_X_DOC
	};
	const char *last = "";

	puts(".Bl -tag -width \"corral_connections_timed_out_total\"");
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		if (strcmp(last, rows[i].metric) == 0)
			continue;
		last = rows[i].metric;
		printf(".It Li corral_%s Pq %s\n%s", rows[i].metric,
		    rows[i].kind[0] == 'C' ? "counter" : "gauge",
		    rows[i].help);
		if (*rows[i].label)
			printf(" By the label\n.Ql %.*s .",
			    (int)strcspn(rows[i].label, "="), rows[i].label);
		putchar('\n');
	}
	puts(".El");
}

int
main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "server") == 0) {
		server_counters();
		return 0;
	}
	puts(".Bl -tag -width \"lock_recoveries (counter)\"");
#define STORE_X_DOC(name, kind, help) \
	printf(".It Li %s Pq %s\n%s\n", #name, \
	    #kind[0] == 'C' ? "counter" : "gauge", help);
	STORE_COUNTERS(STORE_X_DOC)
#undef STORE_X_DOC
	puts(".El");
	return 0;
}
