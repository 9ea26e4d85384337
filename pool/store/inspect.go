package store

// Report is what a state file holds, read without the store: no lock is
// taken and nothing is written or repaired, so it can be read while a
// daemon runs on it (the snapshot may then miss its latest commits).
type Report struct {
	Rows      map[string]Claim
	Version   int  // log format: 0 (no file, or an empty one), 1 or 2
	Reference bool // the file is a JSON claims document, not yet migrated
	// Torn describes a damaged end that Open would truncate: the commits in
	// it were never acknowledged. Nil when the file ends whole.
	Torn *TornTail
	// Cuts are the cut files kept beside the file by earlier startup
	// repairs (see CutFiles), oldest first.
	Cuts []CutFile
}

// TornTail is a damaged end of the log.
type TornTail struct {
	Offset  int64 // Open truncates the file to this length
	Size    int64 // the file's size as found
	Line    int   // the first damaged line
	Reason  string
	Records int // records in it, dropped
}

// Inspect reads path as Open would, without opening a Store. Damage that
// Open would refuse is returned as a *corruptError naming the file, line
// and offset (the Report then holds only Cuts).
func Inspect(path string) (Report, error) {
	l, err := load(path)
	if err != nil {
		return Report{Cuts: CutFiles(path)}, err
	}
	r := Report{Rows: make(map[string]Claim, len(l.rows)), Version: l.version, Reference: l.reference, Cuts: CutFiles(path)}
	for k, row := range l.rows {
		r.Rows[k] = row.claim
	}
	if t := l.torn; t != nil {
		r.Torn = &TornTail{Offset: t.offset, Size: t.size, Line: t.line, Reason: t.reason, Records: t.records}
	}
	return r, nil
}
