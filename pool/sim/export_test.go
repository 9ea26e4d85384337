package sim

// The sim_test tests that turn these knobs start the emulator through
// pool/sim/simtest, which imports sim, so they cannot move into package
// sim: these wrappers give them the knobs without exporting them from the
// package. No other package turns them.

// NodeTenant is nodeTenant, for the sim_test tests.
const NodeTenant = nodeTenant

// OwnerAddrPerClaim is ownerAddrPerClaim, for the sim_test tests.
const OwnerAddrPerClaim = ownerAddrPerClaim

// SetFailRate is setFailRate, for the sim_test tests.
func (s *Server) SetFailRate(f float64) { s.setFailRate(f) }

// SetCapacity is setCapacity, for the sim_test tests.
func (s *Server) SetCapacity(mode string) { s.setCapacity(mode) }

// SetMesh is setMesh, for the sim_test tests.
func (s *Server) SetMesh(on bool) { s.setMesh(on) }

// SetTenantDBDown is setTenantDBDown, for the sim_test tests.
func (s *Server) SetTenantDBDown(down bool) { s.setTenantDBDown(down) }

// AddTenant is addTenant, for the sim_test tests.
func (s *Server) AddTenant(token, name string) { s.addTenant(token, name) }

// RemoveTenant is removeTenant, for the sim_test tests.
func (s *Server) RemoveTenant(name string) bool { return s.removeTenant(name) }

// Archive is archive, for the sim_test tests.
func (s *Server) Archive(id string) bool { return s.archive(id) }
