package peers

import (
	"context"
	"encoding/json"
	"net/netip"
	"slices"

	"k8s.io/klog/v2"

	"github.com/nestlet/nestlet/api"
)

// The directories of direct paths (direct.go): what each cluster tells
// its parents of its subtree, and what each parent tells each child of
// the gateways outside the child's subtree.

// subtreeEntriesLocked are the gateways of this cluster's subtree below
// it, as its parents are told (api.AnnotationGatewaySubtree): what each
// child lists (itself and its own subtree), within the routes the child is
// granted, the child's own entry with the endpoint its packets come from
// and its name here.
func (t *Peers) subtreeEntriesLocked(except string) []api.GatewayEntry {
	var out []api.GatewayEntry
	for _, name := range sortedKeys(t.children) {
		if name == except {
			continue
		}
		p := t.children[name]
		for _, e := range within(t.childSubtrees[name], p.AllowedIPs) {
			if e.PublicKey == p.PublicKey.String() {
				ep := t.childEndpoints[name]
				if !ep.IsValid() {
					continue
				}
				e.Cluster, e.Endpoint = name, ep.String()
			}
			out = append(out, e)
		}
	}
	return out
}

// selfEntryLocked is this cluster's own entry, as its parents are told
// it: its key and its own nodes' pod CIDRs (not its subtree's: a direct
// peer carries the traffic of the two clusters' own pods, so that the
// answers take the same path as the questions, each gateway taking from a
// peer only the sources it routes to it); its parent adds its name and
// endpoint.
func (t *Peers) selfEntryLocked() (api.GatewayEntry, bool) {
	own := t.ownPodCIDRs()
	return api.GatewayEntry{PublicKey: t.gw.PublicKey().String(), Routes: prefixStrings(own)}, len(own) > 0
}

// within keeps of entries the routes inside granted, and the entries with
// some left.
func within(entries []api.GatewayEntry, granted []netip.Prefix) []api.GatewayEntry {
	var out []api.GatewayEntry
	for _, e := range entries {
		var kept []string
		for _, r := range prefixes(e.Routes) {
			if slices.ContainsFunc(granted, func(g netip.Prefix) bool { return g.Bits() <= r.Bits() && g.Contains(r.Addr()) }) {
				kept = append(kept, r.String())
			}
		}
		if len(kept) > 0 {
			e.Routes = kept
			out = append(out, e)
		}
	}
	return out
}

// directory keeps of entries the first of each key, none of the keys in
// skip, at most maxDirectoryEntries.
func directory(entries []api.GatewayEntry, skip map[string]bool) []api.GatewayEntry {
	seen := map[string]bool{}
	var out []api.GatewayEntry
	for _, e := range entries {
		if seen[e.PublicKey] || skip[e.PublicKey] || len(out) == maxDirectoryEntries {
			continue
		}
		seen[e.PublicKey] = true
		out = append(out, e)
	}
	return out
}

// SubtreeAnnotation is what this cluster tells its parents of the
// gateways of its subtree (api.AnnotationGatewaySubtree; "" without
// any), within api.MaxChildAnnotationBytes.
func (t *Peers) SubtreeAnnotation() string {
	if t == nil {
		return ""
	}
	t.mu.Lock()
	var entries []api.GatewayEntry
	if self, ok := t.selfEntryLocked(); ok {
		entries = append(entries, self)
	}
	entries = append(entries, directory(t.subtreeEntriesLocked(""), map[string]bool{t.gw.PublicKey().String(): true})...)
	t.mu.Unlock()
	return boundedJSON(entries)
}

// boundedJSON is entries in JSON, as many of them as fit in
// api.MaxChildAnnotationBytes ("" for none).
func boundedJSON[T any](entries []T) string {
	for n := len(entries); n > 0; n-- {
		raw, err := json.Marshal(entries[:n])
		if err == nil && len(raw) <= api.MaxChildAnnotationBytes {
			return string(raw)
		}
	}
	return ""
}

// directoryForLocked is the directory told to the child of virtual node
// name: the gateways outside its subtree.
func (t *Peers) directoryForLocked(name string) []api.GatewayEntry {
	skip := map[string]bool{t.gw.PublicKey().String(): true}
	if p, ok := t.children[name]; ok {
		skip[p.PublicKey.String()] = true
	}
	for _, e := range t.childSubtrees[name] {
		skip[e.PublicKey] = true
	}
	entries := t.subtreeEntriesLocked(name)
	for _, target := range sortedKeys(t.parentDirs) {
		entries = append(entries, t.parentDirs[target]...)
	}
	return directory(entries, skip)
}

// directoriesViewLocked is what this cluster's directories are made of,
// as one string: when it changes, parents and children are told again.
func (t *Peers) directoriesViewLocked() string {
	self, _ := t.selfEntryLocked()
	raw, _ := json.Marshal([]any{self, t.subtreeEntriesLocked(""), t.parentDirs})
	return string(raw)
}

// SetChildSubtree records what the child of virtual node name lists of
// the gateways of its subtree (raw: api.AnnotationGatewaySubtree, ""
// none). Only what lies in the routes it is granted is ever told on.
func (t *Peers) SetChildSubtree(ctx context.Context, name, raw string) {
	var entries []api.GatewayEntry
	if raw != "" {
		if err := json.Unmarshal([]byte(raw), &entries); err != nil {
			klog.FromContext(ctx).Info("Ignoring a child's list of its subtree's gateways", "node", name, "err", err)
			entries = nil
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(entries) == 0 {
		delete(t.childSubtrees, name)
		return
	}
	t.childSubtrees[name] = directory(entries, nil)
}
