/*
 * Writes the store's counter list (shm/store_counters.h) as mdoc for
 * corral(8), so the manual lists exactly what corral -s prints.
 */
#include <stdio.h>

#include "shm/store_counters.h"

int
main(void)
{
	puts(".Bl -tag -width \"lock_recoveries (counter)\"");
#define STORE_X_DOC(name, kind, help) \
	printf(".It Li %s Pq %s\n%s\n", #name, \
	    #kind[0] == 'C' ? "counter" : "gauge", help);
	STORE_COUNTERS(STORE_X_DOC)
#undef STORE_X_DOC
	puts(".El");
	return 0;
}
