package sim

import "github.com/cocoonstack/vk-sandbox/pool"

// engineV1 is the engine V1 names in every pool key.
const engineV1 = "ch"

// engineKey is a pool key as V1 writes it.
type engineKey struct {
	pool.Key
	Engine string `json:"engine"`
}

// engineRow and enginePool are a row and a pool with V1's key; the outer
// key field hides the embedded one from encoding/json.
type engineRow struct {
	pool.Sandbox
	Key engineKey `json:"key"`
}

type enginePool struct {
	pool.PoolInfo
	Key engineKey `json:"key"`
}

// presentRow is a row as this API version writes it: without the fields
// the version predates. token says whether the caller may see the
// sandbox's token (a root by-id read).
func (s *Server) presentRow(sb pool.Sandbox, token bool) any {
	if !token || !s.api.TokenRead {
		sb.Token = ""
	}
	if !s.api.TenantAPI {
		sb.Tenant = ""
	}
	if !s.api.ClaimedAt {
		sb.ClaimedAt = nil // V1: the index keeps it (it orders the listing), rows do not
	}
	if !s.api.RowSizes {
		sb.CPUCount, sb.MemTotalBytes = 0, 0
	}
	if !s.api.FailedVMMs {
		sb.Failed, sb.Restarts, sb.RestartedAt = false, 0, nil
	}
	if s.api.EngineInKey {
		return engineRow{Sandbox: sb, Key: engineKey{Key: sb.Key, Engine: engineV1}}
	}
	return sb
}

// presentList is the listing body; an empty node is [], never null.
func (s *Server) presentList(rows []pool.Sandbox) any {
	out := make([]any, 0, len(rows))
	for _, sb := range rows {
		out = append(out, s.presentRow(sb, false))
	}
	return struct {
		Sandboxes []any `json:"sandboxes"`
	}{out}
}

// presentInfo is /v1/info as this API version writes it.
func (s *Server) presentInfo(info pool.Info) any {
	if !s.api.AdvertiseAddr {
		info.AdvertiseAddr = ""
	}
	if !s.api.FailedVMMs {
		info.Failed = 0
	}
	if !s.api.EngineInKey {
		return info
	}
	pools := make([]enginePool, 0, len(info.Pools))
	for _, p := range info.Pools {
		pools = append(pools, enginePool{PoolInfo: p, Key: engineKey{Key: p.Key, Engine: engineV1}})
	}
	return struct {
		pool.Info
		Pools []enginePool `json:"pools"`
	}{info, pools}
}
