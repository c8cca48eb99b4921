package dataplane

// planNFTables is a plan from scratch (last nil) or against last, with nothing to reuse and
// every Service rendered: what the tests compare the plane's hinted plans with.
func planNFTables(fam Family, services []Service, last *nftState) *nftPlan {
	return planNFTablesReusing(fam, services, last, nil, nil, nil)
}
