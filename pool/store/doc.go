/*
Package store is the durable claim store: for every Pod key it holds the
sandbox ID, release token, address and Pod UID of the VM this node delivered.
It is the only authority to destroy those VMs (DESIGN §8), so it is built
for correctness first: a claim that a caller was told is durable survives
any crash, and a damaged file stops the process rather than lose a
credential.

# Usage

	s, err := store.Open("/var/lib/vk-sandbox/claims.json", store.Options{Logger: lg})
	if err != nil {
		return err // *store.CorruptError, a held lock, or an unwritable path
	}
	defer s.Close()

	// Returns nil only once the claim is on disk (data and directory entry
	// fsynced). Concurrent Puts share one write and one fsync.
	if err := s.Put(ctx, "ns/name", store.Claim{ID: id, Token: tok, ...}); err != nil {
		return err // not acknowledged: treat the claim as not recorded
	}
	c, ok := s.Get("ns/name") // memory only; only ever durable state
	err = s.Delete(ctx, "ns/name")

	s.Range(func(key string, c store.Claim) bool { ...; return true })

# On-disk format

The state file is an append-only log of lines. Each line is one record,
framed with a checksum of its body:

	{"crc":"1c2d3e4f","rec":{"op":"put","key":"ns/name","claim":{"id":"sb-1","token":"…","address":"10.0.0.7","podUID":"…","claimedAt":"2025-01-02T03:04:05Z","deadline":"2025-01-02T04:04:05Z"}}}
	{"crc":"5a6b7c8d","rec":{"op":"del","key":"ns/name"}}

The frame is fixed: the 8 bytes {"crc":", eight lowercase hex digits of the
CRC-32C (Castagnoli) of the body bytes exactly as written, the 8 bytes
","rec":, the body, then }\n. The body of a put carries the whole claim in
the reference's JSON field names (plus ownerUID and owner when set), so any one put
record alone restores its row; a del record is a tombstone. The table is the
result of replaying the records in order. Every line is itself a JSON
document, so jq can read the file.

A record costs O(1) bytes: a commit appends its records and never rewrites
the table. Bodies are written byte for byte as encoding/json would write
them (by a hand-written encoder, which tests pin to encoding/json), and read
back with encoding/json.

# Lifecycle

Open creates the directory (0700, each created level's parent fsynced) and,
if absent, the file (0600, directory fsynced). It takes an exclusive,
non-blocking flock on the sibling file claims.json.lock and keeps it until
Close; a second opener, in this process or another, gets an error naming the
file and the lock holder. It then removes stale compaction temp files,
loads the file (see Recovery), and starts the single writer goroutine.

Put, Delete and Apply validate and encode their records in the caller's
goroutine and queue them. The writer takes everything queued at once (the
group), appends it with one write and one fdatasync (fsyncFile), applies it
to the in-memory table, and only then acknowledges every caller in the
group. After acknowledging, it yields while the queue is still growing, so
the callers it just woke can join the next group instead of missing it. Memory therefore never holds a row that is not durable, and Get is a
map lookup. Deleting a key absent from the table returns at once.

When the log holds more than max(CompactMin, 2*live) records, the writer
starts a compaction: it copies the put line of every live row (the
snapshot), and a compactor goroutine writes them to claims.json.tmp-* in the
same directory and fsyncs it. Meanwhile the writer goes on committing to the
old log, which stays whole and authoritative, and keeps a copy of every
batch it acknowledges (the tail). Once the snapshot is durable, the writer,
between two batches, appends the tail to the temp file, fsyncs it, renames
it over the state file and fsyncs the directory (fsyncDir). The result is a
normal log. So a commit never waits for the O(live) write and its fsync,
only for the copy of the row pointers and the short switch. Each compaction
is O(live) and is followed by at least max(CompactMin, live) appends, so it
is O(1) amortized per commit; the log exceeds its bound only by the commits
made while one compaction runs.

If a write or an fsync fails (disk full, EIO, a read-only remount), the
whole group fails with an error naming the file and the cause, no caller is
acknowledged, and memory is unchanged. The fsync is not retried: after a
failed fsync the kernel may have dropped the dirty pages, so a second fsync
that succeeds proves nothing. Instead the store is marked dirty, and the
next commit first rewrites the whole file from memory by the compaction
path; if that fails too, the commit fails. Close does the same rewrite if
the store is still dirty, then releases the lock.

An error from Put means "not acknowledged", never "unknown": the context
bounds only the wait before the writer takes the request. A commit that was
not acknowledged may or may not survive a crash.

# Recovery

A missing or empty file is an empty table.

A torn tail is a damaged end of the log: the last line is unterminated, or
it fails its frame or checksum and no whole record follows it (appended
garbage counts as such a tail). It can only be the group that was being
written when the process or the machine died, which was never acknowledged, so Open
truncates the file back to the end of the last whole record, fsyncs it and
logs the offset and the number of bytes dropped (not the bytes: they may
hold a token).

A damaged line followed by a whole record, or a whole record (checksum
fine) whose content is unusable (an unknown op, an empty key, a put without
a claim), is corruption: Open returns a *CorruptError naming the file, the
line and the byte offset, and the process must not start until a human has
looked. Nothing is truncated in that case.

# Migration from the reference format

A file that does not start with the record frame must be the reference
vk-sandbox's claims.json: one JSON document, compact or pretty-printed,
{"claims":{"ns/name":{"id":…,"token":…,"address":…,"podUID":…,"claimedAt":…,"deadline":…}}}.
Its rows load unchanged, and Open immediately rewrites the file into the log
format by the compaction path (temp file, fsync, rename, directory fsync).
A crash before the rename leaves the reference file as it was, to be
migrated again; after it, the file is a log. No copy of the old document is
kept. A document without a "claims" member, or with trailing data, is a
*CorruptError.

# Security

The file is 0600 (an existing wider file is tightened, with a warning) and
the directory should be 0700 (a wider existing directory is reported, not
changed). No error or log line contains a token: errors name the Pod key and
the cause, and decoding errors describe JSON problems without quoting the
input.

UnsafeNoFsync turns every fsync off. It is for tests and benchmarks only.
*/
package store
