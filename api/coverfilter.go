package api

import (
	"encoding/base64"
	"hash/fnv"
	"math/bits"
)

// CoverFilter is a Bloom filter of cluster names: a fixed-size set that may
// answer "maybe" for a name never added, and never "no" for one added. The
// union of two filters is their bitwise or, so a parent merges its
// children's without knowing the names.
type CoverFilter []byte

const (
	// coverFilterBytes is the size of a filter: 12,288 bits, 2 KiB in
	// base64.
	coverFilterBytes = 1536
	// coverFilterHashes is how many bits a name sets: about 3 false
	// "maybe"s in 1,000 at 1,000 names, 3 in 10 at 3,000.
	coverFilterHashes = 8
)

// NewCoverFilter returns an empty filter.
func NewCoverFilter() CoverFilter { return make(CoverFilter, coverFilterBytes) }

// ParseCoverFilter decodes a filter from Summary.BranchFilter; one that
// does not decode to the right size says "maybe" to every name, which only
// costs capacity, never a loop.
func ParseCoverFilter(s string) CoverFilter {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b) != coverFilterBytes {
		full := NewCoverFilter()
		for i := range full {
			full[i] = 0xff
		}
		return full
	}
	return b
}

// String encodes the filter for Summary.BranchFilter.
func (f CoverFilter) String() string { return base64.StdEncoding.EncodeToString(f) }

// Add puts name in the filter.
func (f CoverFilter) Add(name string) {
	for _, bit := range f.bits(name) {
		f[bit/8] |= 1 << (bit % 8)
	}
}

// Union adds every name of g to f.
func (f CoverFilter) Union(g CoverFilter) {
	for i := range f {
		f[i] |= g[i]
	}
}

// MayContain reports whether name may have been added.
func (f CoverFilter) MayContain(name string) bool {
	for _, bit := range f.bits(name) {
		if f[bit/8]&(1<<(bit%8)) == 0 {
			return false
		}
	}
	return true
}

// Intersects reports whether f and g may hold a name in common: some name's
// bits all set in both is possible only if they share a set bit.
func (f CoverFilter) Intersects(g CoverFilter) bool {
	for i := range f {
		if bits.OnesCount8(f[i]&g[i]) > 0 {
			return true
		}
	}
	return false
}

// bits are the positions name sets, by double hashing of its 64-bit FNV-1a
// hash (Kirsch and Mitzenmacher).
func (f CoverFilter) bits(name string) [coverFilterHashes]uint {
	h := fnv.New64a()
	_, _ = h.Write([]byte(name))
	sum := h.Sum64()
	h1, h2 := uint(sum), uint(sum>>32)|1
	m := uint(len(f) * 8)
	var out [coverFilterHashes]uint
	for i := range out {
		out[i] = (h1 + uint(i)*h2) % m
	}
	return out
}
