package store

import (
	"encoding/binary"
	"hash/crc32"
	"math/rand/v2"
	"strconv"
)

// Format version 2 (docs/state-file.md, "On-disk format") adds two kinds of
// framed lines to the records of version 1:
//
//	{"crc":"…","rec":{"op":"format","version":2,"salt":"<16 hex>"}}   first line
//	{"crc":"…","rec":{"op":"commit","n":N,"len":L,"sum":"<8 hex>"}}  end of a group
//
// Every group commit is its records followed by one commit marker, in one
// write. The marker names the group's record count and byte length and a
// CRC-32C over those bytes, seeded with the file's salt. A power cut can
// leave any subset of the last group's sectors on disk, so record-level
// checksums alone cannot tell a torn last group from damage in the middle:
// the marker can. A group counts only once its marker matches it; a group
// whose marker does not match is a torn tail if no matching group follows,
// and corruption if one does.
//
// The salt is drawn afresh for every file the store writes (creation,
// compaction, migration, rebuild). Sectors that a power cut leaves holding
// stale blocks of an older log (the previous file's freed blocks are the
// first to be reused) then never pass for a group of this one, even when
// they hold whole records and markers. Within one file, a group's bytes
// only ever sit at one offset: the file is only appended to, and truncated
// only back over a torn tail, which holds no committed group.
const (
	formatVersion = 2
	opFormat      = "format"
	opCommit      = "commit"
	saltDigits    = 16
	sumDigits     = 8

	// snapshotGroup bounds the records per group in a compaction's
	// snapshot, so that loading it never buffers more than one such group.
	snapshotGroup = 1024
)

// newSalt draws the salt of a new log file. It needs to differ between
// files, not to be secret.
func newSalt() uint64 { return rand.Uint64() }

// groupSeed is the CRC-32C state a group's checksum starts from in a file
// with salt.
func groupSeed(salt uint64) uint32 {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], salt)
	return crc32.Update(0, castagnoli, b[:])
}

// groupSum is the checksum a commit marker carries for the records recs.
func groupSum(salt uint64, recs []byte) uint32 {
	return crc32.Update(groupSeed(salt), castagnoli, recs)
}

// encodeHeader frames the first line of a version 2 log. Its body is what
// encoding/json writes for headerBody.
func encodeHeader(salt uint64) []byte {
	b := make([]byte, bodyOffset, frameBytes+64)
	b = append(b, `{"op":"format","version":`...)
	b = strconv.AppendInt(b, formatVersion, 10)
	b = append(b, `,"salt":"`...)
	b = appendHex(b, salt, saltDigits)
	b = append(b, `"}`...)
	return sealFrame(b)
}

// appendMarker appends the commit marker of a group of n records whose
// bytes, already in the buffer, are recs. Its body is what encoding/json
// writes for markerBody.
func appendMarker(dst []byte, n int, recs []byte, salt uint64) []byte {
	return appendMarkerSum(dst, n, len(recs), groupSum(salt, recs))
}

// appendMarkerSum is appendMarker for a checksum computed incrementally.
func appendMarkerSum(dst []byte, n, size int, sum uint32) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, bodyOffset)...)
	dst = append(dst, `{"op":"commit","n":`...)
	dst = strconv.AppendInt(dst, int64(n), 10)
	dst = append(dst, `,"len":`...)
	dst = strconv.AppendInt(dst, int64(size), 10)
	dst = append(dst, `,"sum":"`...)
	dst = appendHex(dst, uint64(sum), sumDigits)
	dst = append(dst, `"}`...)
	return append(dst[:start], sealFrame(dst[start:])...)
}

// headerBody and markerBody are the JSON shapes of the two version 2 lines;
// the encoders above write exactly what encoding/json writes for them.
type headerBody struct {
	Op      string `json:"op"`
	Version int    `json:"version"`
	Salt    string `json:"salt"`
}

type markerBody struct {
	Op  string `json:"op"`
	N   int    `json:"n"`
	Len int    `json:"len"`
	Sum string `json:"sum"`
}

func appendHex(dst []byte, v uint64, digits int) []byte {
	const hexDigits = "0123456789abcdef"
	for i := digits - 1; i >= 0; i-- {
		dst = append(dst, hexDigits[(v>>uint(4*i))&0xf])
	}
	return dst
}

// sealGroups appends to dst the groups whose records lie end to end in
// recs, each followed by its marker for a file with salt. Compaction uses it
// to carry the groups it copies from the old log into the new file, whose
// salt differs.
func sealGroups(dst, recs []byte, groups []tailGroup, salt uint64) []byte {
	for _, g := range groups {
		dst = append(dst, recs[:g.size]...)
		dst = appendMarker(dst, g.n, recs[:g.size], salt)
		recs = recs[g.size:]
	}
	return dst
}

// tailGroup is one group acknowledged from the old log while a compaction
// ran: n records, size bytes.
type tailGroup struct{ n, size int }
