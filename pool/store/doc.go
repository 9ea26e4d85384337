/*
Package store is the durable claim store: for every Pod key it holds the
sandbox ID, release token, address and Pod UID of the VM this node delivered.
It is the only authority to destroy those VMs (docs/state-file.md), so it is
built for correctness first: a claim that a caller was told is durable survives
any crash, and a damaged file stops the process rather than lose a
credential.

# Usage

	s, err := store.Open("/var/lib/vk-sandbox/claims.json", store.Options{Logger: lg})
	if err != nil {
		return err // a damaged file, a held lock, or an unwritable path
	}
	defer s.Close()

	// Returns nil only once the claim is on disk (data and directory entry
	// fsynced). Concurrent Puts share one write and one fsync.
	if err := s.Put(ctx, "ns/name", store.Claim{ID: id, Token: tok, ...}); err != nil {
		return err // not acknowledged: treat the claim as not recorded
	}
	c, ok := s.Get("ns/name") // memory only; only ever durable state
	err = s.Delete(ctx, "ns/name") // ordered after any queued or in-flight Put of the key

	s.Range(func(key string, c store.Claim) bool { ...; return true })

# On-disk format

The state file is an append-only log of lines (format version 2). Each line
is framed with a checksum of its body:

	{"crc":"73539ac7","rec":{"op":"format","version":2,"salt":"9f86d081884c7d65"}}
	{"crc":"f8b4f93e","rec":{"op":"put","key":"ns/name","claim":{"id":"sb-1","token":"…","address":"10.0.0.7","podUID":"…","claimedAt":"2025-01-02T03:04:05Z","deadline":"2025-01-02T04:04:05Z"}}}
	{"crc":"70c25cfb","rec":{"op":"commit","n":1,"len":195,"sum":"ed8c7b30"}}
	{"crc":"3cd11892","rec":{"op":"del","key":"ns/name"}}
	{"crc":"b1224c3e","rec":{"op":"commit","n":1,"len":54,"sum":"c19e2df5"}}

The frame is fixed: the 8 bytes {"crc":", eight lowercase hex digits of the
CRC-32C (Castagnoli) of the body bytes exactly as written, the 8 bytes
","rec":, the body, then }\n. The first line is the format header, whose
salt is drawn afresh for every file the store writes. Then come groups: the
records of one group commit (puts and dels) followed by one commit marker,
appended in one write. The marker carries the group's record count n, its
byte length len (records only) and sum, the CRC-32C of those bytes seeded
with the salt. The body of a put carries the whole claim in the JSON claims
document's field names (plus ownerUID and owner when set), so any one put record
alone restores its row; a del record is a tombstone. The table is the result
of replaying, in order, the records of the groups whose marker matches.
Every line is itself a JSON document, so jq can read the file.

A record costs O(1) bytes and a group one marker: a commit appends and
never rewrites the table, and its marker checksums only its own bytes.
Bodies are written byte for byte as encoding/json would write them (by
hand-written encoders, which tests pin to encoding/json), and read back with
encoding/json (or a fast path that tests pin to it).

Version 1, written by older binaries, is the same records without header or
markers, each record acknowledged on its own. It is still read (see
Recovery) and rewritten into version 2 at once. A binary that only knows
version 1 refuses a version 2 file (unknown record op), rather than
misread it.

# Lifecycle

Open creates the directory (0700, each created level's parent fsynced) and,
if absent or empty, the file (0600, with its header, fsynced, and the
directory fsynced). It takes an exclusive,
non-blocking flock on the sibling file claims.json.lock and keeps it until
Close; a second opener, in this process or another, gets an error naming the
file and the lock holder. It then removes stale compaction temp files,
loads the file (see Recovery), and starts the single writer goroutine.

Put, Delete and Apply validate and encode their records in the caller's
goroutine and queue them. The writer takes everything queued at once (the
group), appends its records and their commit marker with one write and one
fdatasync (fsyncFile), applies it to the in-memory table, and only then
acknowledges every caller in the group. After acknowledging, it yields while
the queue is still growing, so the callers it just woke can join the next
group instead of missing it. Memory therefore never holds a row that is not
durable, and Get is a map lookup.

Delete is ordered after every Put of its key that is queued or in flight
when it is called: a Delete of a key that is not in the table yet but has
such a Put is queued behind that Put. Only a key that is neither in the table nor pending
a Put is deleted at once, without an fsync. The queue counts pending puts
per key for this; callers need no per-key lock for it.

When the log outgrows its bound (stated at Store.maybeCompact: O(1)
amortized per commit), the writer starts a compaction: it copies the put
line of every live row (the snapshot), and a compactor goroutine writes
them, as a version 2 log with a new salt (header, then groups of at most
1024 records), to claims.json.tmp-* in the same directory and fsyncs it.
Meanwhile the writer goes on committing to the old log, which stays whole
and authoritative, and keeps a copy of every batch it acknowledges (the
tail). Once the snapshot is durable, the writer, between two batches,
appends the tail to the temp file (each group with a marker re-sealed for
the new salt), fsyncs it, renames it over the state file and fsyncs the
directory (fsyncDir). The result is a normal log. So a commit never waits
for the O(live) write and its fsync, only for the copy of the row
pointers and the short switch.

If a write or an fsync fails (disk full, EIO, a read-only remount), the
whole group fails with an error naming the file and the cause, no caller is
acknowledged, and memory is unchanged. A failed fsync is never retried
(why: Store.syncFile); instead the store is marked dirty, and the next
commit first rewrites the whole file from memory by the compaction path;
if that fails too, the commit fails. Close does the same rewrite if the
store is still dirty, then releases the lock.

An error from Put means "not acknowledged", never "unknown": the context
bounds only the wait before the writer takes the request. A commit that was
not acknowledged may or may not survive a crash, but only as a whole: the
ops of one Apply are in one group, and a group survives entirely or not at
all.

# Recovery

A missing or empty file is an empty table (and gets its header).

A group counts only if its commit marker is present and matches it: the
marker follows the previous committed group by exactly len bytes, and the
group has n lines whose bytes have the marker's sum. A power cut during a
group commit can leave any subset of that write's sectors on disk, later
ones without earlier ones, the rest reading as zeros or as whatever blocks
were there before (an older log's, even). Whatever follows the last
committed group is therefore a torn tail: records without a marker, a
marker that does not match, zeroed sectors, garbage, in any mix. It can only
be the group that was being written when the machine stopped, which was
never acknowledged (the writer acknowledges a group after its fsync, and
writes the next one after that), so Open truncates the file back to the end
of the last committed group, fsyncs it and logs the offset and the number of
bytes dropped (not the bytes: they may hold a token). Before the truncate it
copies the format header and the cut bytes into a new cut file beside the
state file (claims.json.cut-<UTC time>-<n>, 0600, never overwritten), and
fsyncs it and the directory, so a crash between the two keeps the bytes;
Salvage reads a cut file, and CutFiles lists them. A file whose first
line is damaged and that holds nothing whole after it (a header torn before
its first fsync) is an empty table.

Damage followed by a group that matches its own marker is corruption: that
group was fsynced after the damaged one, which therefore was acknowledged.
So is an unusable record (an unknown op, an empty key, a put without a
claim, a second header) inside a committed group, a damaged header followed
by whole records, and a header of another version. Open returns an
error (a *corruptError) naming the file, the line and the byte offset of the
first damage, and the process must not start until a human has looked.
Nothing is truncated in that case.

A version 1 log is read by the version 1 rule: a line that is not a whole
record is a torn tail if no whole record follows it, and corruption if one
does; a whole record with unusable content is corruption anywhere. After
loading it (and truncating a torn tail), Open rewrites it into version 2 by
the compaction path, as it does a JSON claims document (see below).

# Migration from the JSON claims document

A file that does not start with the record frame must be a JSON claims
document, the format of claims.json before the claim log: one JSON document,
compact or pretty-printed,
{"claims":{"ns/name":{"id":…,"token":…,"address":…,"podUID":…,"claimedAt":…,"deadline":…}}}.
Its rows load unchanged, and Open immediately rewrites the file into the log
format (version 2) by the compaction path (temp file, fsync, rename,
directory fsync).
A crash before the rename leaves the JSON claims document as it was, to be
migrated again; after it, the file is a log. No copy of the old document is
kept. A document without a "claims" member, or with trailing data, is
corruption (a *corruptError).

# Security

The file is 0600 (an existing wider file is tightened, with a warning) and
the directory should be 0700 (a wider existing directory is reported, not
changed). No error or log line contains a token: errors name the Pod key and
the cause, and decoding errors describe JSON problems without quoting the
input.

UnsafeNoFsync turns every fsync off. It is for tests and benchmarks only.
*/
package store
