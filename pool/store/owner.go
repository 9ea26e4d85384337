package store

// OwnerUnknown is the Owner of a row whose controller owner is not known:
// a row migrated from the JSON claims document, which records none. It
// is not the same as a bare Pod's row (Owner and OwnerUID empty): a bare
// Pod's delete is release authority, while for an unknown owner only a
// lookup of a real owner may release. The first Pod whose UID matches the
// row fills the owner in. The value can never be a real owner, which is
// always "apiVersion/kind/name".
const OwnerUnknown = "?"

// OwnerKnown reports whether c records its controller owner (or that it has
// none, a bare Pod's row).
func (c Claim) OwnerKnown() bool { return c.Owner != OwnerUnknown }
