/*
 * The store's counters, written once.  The counters in the mapping,
 * struct store_stats, corral -s, corral -s -j and the manual all expand
 * this list, so a counter added here shows up everywhere.
 *
 *   X(name, kind, help)
 *
 * kind: COUNTER only grows (events since the store was made), GAUGE goes
 * up and down (what is in the store now).  help is one sentence for the
 * manual.  The names are part of corral -s's output: never rename one.
 */
#ifndef CORRAL_STORE_COUNTERS_H
#define CORRAL_STORE_COUNTERS_H

#define STORE_COUNTERS(X) \
	X(gets, COUNTER, \
	    "Lookups of a key, by get or by lookup.") \
	X(hits, COUNTER, \
	    "Lookups that found a fresh value.") \
	X(misses, COUNTER, \
	    "Lookups that found no fresh value.") \
	X(stale_hits, COUNTER, \
	    "Expired values handed out while another process refreshes " \
	    "them.") \
	X(sets, COUNTER, \
	    "Values stored.") \
	X(deletes, COUNTER, \
	    "Values deleted (a purge).") \
	X(evictions, COUNTER, \
	    "Live values dropped to make room: the store was full.") \
	X(expirations, COUNTER, \
	    "Expired values reclaimed.") \
	X(too_large, COUNTER, \
	    "Values not stored because they were over max_object.") \
	X(nomem, COUNTER, \
	    "Values not stored because nothing could be evicted for them.") \
	X(lease_grants, COUNTER, \
	    "Misses that made their process the one to fill the key.") \
	X(lease_waits, COUNTER, \
	    "Misses that waited for another process to fill the key.") \
	X(lease_timeouts, COUNTER, \
	    "Fills that took longer than the lease and were taken over.") \
	X(lock_recoveries, COUNTER, \
	    "Locks taken over from a process that died holding them.") \
	X(corruptions, COUNTER, \
	    "Damaged entries found and dropped.") \
	X(items, GAUGE, \
	    "Values in the store now.") \
	X(bytes_used, GAUGE, \
	    "Bytes of the store that hold values now, with their headers.") \
	X(bytes_total, GAUGE, \
	    "Bytes of the store that can hold values.")

#endif
