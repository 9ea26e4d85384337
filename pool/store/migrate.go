package store

import (
	"bytes"
	"encoding/json"
	"errors"
)

// decodeReference parses a JSON claims document: a single JSON document
// {"claims":{"ns/name":{id,token,address,podUID,claimedAt,
// deadline}}}, compact or pretty-printed. Rows load unchanged; each is also
// framed as a put record so that the migration (and later compactions) can
// write it. A document without a "claims" member is not taken for an empty
// table: it is not a claims file at all.
func decodeReference(path string, data []byte) (map[string]row, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, jsonCorrupt(path, data, err)
	}
	raw, ok := top["claims"]
	if !ok {
		return nil, &corruptError{Path: path, Line: 1,
			Reason: `neither a claim log nor a JSON claims document (no "claims" member)`}
	}
	var claims map[string]Claim
	if err := json.Unmarshal(raw, &claims); err != nil {
		return nil, jsonCorrupt(path, data, err)
	}
	rows := make(map[string]row, len(claims))
	for key, c := range claims {
		// The document records no owner: the row's owner is unknown, which
		// is not a bare Pod's (see OwnerUnknown). A row that does name one
		// keeps it.
		if c.Owner == "" && c.OwnerUID == "" {
			c.Owner = OwnerUnknown
		}
		e, err := encodeOp(Op{Key: key, Claim: c})
		if err != nil {
			return nil, &corruptError{Path: path, Line: 1, Reason: "JSON claims document: " + err.Error()}
		}
		rows[key] = row{claim: e.claim, line: e.line}
	}
	return rows, nil
}

// jsonCorrupt locates a JSON error in data for the corruptError.
func jsonCorrupt(path string, data []byte, err error) *corruptError {
	var off int64
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		off = min(syn.Offset, int64(len(data)))
	}
	line := 1 + bytes.Count(data[:off], []byte{'\n'})
	return &corruptError{Path: path, Offset: off, Line: line,
		Reason: "not a claim log, and not a valid JSON claims document: " + jsonReason(err)}
}

// migrate converts a JSON claims document to the log format in place, by the
// same atomic rewrite as compaction (temp file, fsync, rename, directory
// fsync). A crash before the rename leaves the document untouched, and
// it is migrated again at the next Open; after it, the file is a log. No
// copy of the old document is kept: it would be a second, stale set of
// release credentials.
//
// A version 1 log is upgraded the same way, for the same reasons.
func (s *Store) migrate(why, what string) error {
	if err := s.rewrite(why); err != nil {
		return err
	}
	s.lg.Info("claim store: migrated "+what+" to the current log format", "rows", len(s.rows), "version", formatVersion)
	return nil
}
