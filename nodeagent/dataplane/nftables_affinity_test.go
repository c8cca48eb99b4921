package dataplane

import (
	"encoding/binary"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// affinityChanges is changes(p) plus "set affinity_T" for each affinity set a partial Sync
// creates and "forget PORT: all" or "forget PORT: ENDPOINT" for the clients it deletes.
func affinityChanges(p *nftPlan) []string {
	out := changes(p)
	for _, secs := range p.newAffinity {
		out = append(out, "set "+affinitySet(secs).String())
	}
	var forget []string
	for k, f := range p.forget {
		line := "forget " + spellKey(affinitySet(1), k) + ":"
		if f.all {
			line += " all"
		}
		for _, ep := range slices.Sorted(maps.Keys(f.endpoints)) {
			line += " " + spellData(ep)
		}
		forget = append(forget, line)
	}
	slices.Sort(forget)
	return append(out, forget...)
}

// spellData spells endpoint map data: address . port.
func spellData(v string) string {
	a, _ := netip.AddrFromSlice([]byte(v[:len(v)-4]))
	return a.String() + " . " + strconv.Itoa(int(binary.BigEndian.Uint16([]byte(v[len(v)-4:]))))
}

// TestNFTPlanAffinity follows a Service with session affinity through Syncs: its ports join an
// affinity set, and whatever makes a client's recorded endpoint wrong is forgotten.
func TestNFTPlanAffinity(t *testing.T) {
	sticky := func(affinity time.Duration, eps ...string) []Service {
		s := web()
		s.Affinity = affinity
		for _, a := range eps {
			s.Endpoints = append(s.Endpoints, ep(a, false, "http/8080"))
		}
		return []Service{s}
	}
	steps := []struct {
		desc     string
		full     bool
		services []Service
		want     []string
	}{{
		desc: "full: the port is in the set of its affinity", full: true,
		services: sticky(3*time.Hour, "198.51.100.1", "198.51.100.2"),
		want: []string{
			"+affinity_10800 192.0.2.10 . 6 . 80",
			"+endpoints_2 192.0.2.10 . 6 . 80 . 0 : 198.51.100.1 . 8080",
			"+endpoints_2 192.0.2.10 . 6 . 80 . 1 : 198.51.100.2 . 8080",
			"+masquerade 192.0.2.10 . 6 . 80",
			"+vips 192.0.2.10",
		},
	}, {
		desc:     "an endpoint added: nothing to forget",
		services: sticky(3*time.Hour, "198.51.100.1", "198.51.100.2", "198.51.100.3"),
		want: []string{
			"+endpoints_3 192.0.2.10 . 6 . 80 . 0 : 198.51.100.1 . 8080",
			"+endpoints_3 192.0.2.10 . 6 . 80 . 1 : 198.51.100.2 . 8080",
			"+endpoints_3 192.0.2.10 . 6 . 80 . 2 : 198.51.100.3 . 8080",
			"-endpoints_2 192.0.2.10 . 6 . 80 . 0 : 198.51.100.1 . 8080",
			"-endpoints_2 192.0.2.10 . 6 . 80 . 1 : 198.51.100.2 . 8080",
			"map endpoints_3",
		},
	}, {
		desc:     "an endpoint gone: its clients are forgotten",
		services: sticky(3*time.Hour, "198.51.100.2", "198.51.100.3"),
		want: []string{
			"+endpoints_2 192.0.2.10 . 6 . 80 . 0 : 198.51.100.2 . 8080",
			"+endpoints_2 192.0.2.10 . 6 . 80 . 1 : 198.51.100.3 . 8080",
			"-endpoints_3 192.0.2.10 . 6 . 80 . 0 : 198.51.100.1 . 8080",
			"-endpoints_3 192.0.2.10 . 6 . 80 . 1 : 198.51.100.2 . 8080",
			"-endpoints_3 192.0.2.10 . 6 . 80 . 2 : 198.51.100.3 . 8080",
			"forget 192.0.2.10 . 6 . 80: 198.51.100.1 . 8080",
		},
	}, {
		desc:     "another timeout: a new set, the clients kept",
		services: sticky(time.Minute, "198.51.100.2", "198.51.100.3"),
		want:     []string{"+affinity_60 192.0.2.10 . 6 . 80", "-affinity_10800 192.0.2.10 . 6 . 80", "set affinity_60"},
	}, {
		desc:     "affinity switched off: every client forgotten",
		services: sticky(0, "198.51.100.2", "198.51.100.3"),
		want:     []string{"-affinity_60 192.0.2.10 . 6 . 80", "forget 192.0.2.10 . 6 . 80: all"},
	}, {
		desc:     "switched on again: nothing to forget",
		services: sticky(time.Minute, "198.51.100.2", "198.51.100.3"),
		want:     []string{"+affinity_60 192.0.2.10 . 6 . 80"},
	}, {
		desc: "the Service gone: every client forgotten",
		want: []string{
			"-affinity_60 192.0.2.10 . 6 . 80",
			"-endpoints_2 192.0.2.10 . 6 . 80 . 0 : 198.51.100.2 . 8080",
			"-endpoints_2 192.0.2.10 . 6 . 80 . 1 : 198.51.100.3 . 8080",
			"-masquerade 192.0.2.10 . 6 . 80",
			"-vips 192.0.2.10",
			"forget 192.0.2.10 . 6 . 80: all",
		},
	}}
	var last *nftState
	for _, s := range steps {
		if s.full {
			last = nil
		}
		p := planNFTables(IPv4, s.services, last)
		if got := affinityChanges(p); !slices.Equal(got, s.want) {
			t.Fatalf("%s:\ngot:\n%s\nwant:\n%s", s.desc, strings.Join(got, "\n"), strings.Join(s.want, "\n"))
		}
		last = p.state
	}
}

// TestNFTClientsStale: a full Sync deletes the clients of ports without affinity and those sent
// to an endpoint their port lacks.
func TestNFTClientsStale(t *testing.T) {
	s := web(ep("198.51.100.1", false, "http/8080"))
	s.Affinity = time.Hour
	plain := dns(ep("198.51.100.3", false, "dns/UDP/53"))
	stale := planNFTables(IPv4, []Service{s, plain}, nil).state.stale(4)
	client := netip.MustParseAddr("203.0.113.9").AsSlice()
	for _, tc := range []struct {
		desc      string
		vip       string
		pn        byte
		port      uint16
		ep        string
		epPort    uint16
		wantStale bool
	}{
		{"a port with affinity, its endpoint", "192.0.2.10", 6, 80, "198.51.100.1", 8080, false},
		{"a port with affinity, an endpoint it lacks", "192.0.2.10", 6, 80, "198.51.100.2", 8080, true},
		{"a port without affinity", "192.0.2.53", 17, 53, "198.51.100.3", 53, true},
	} {
		key := append(appendPortKey(nil, netip.MustParseAddr(tc.vip), tc.pn, tc.port), client...)
		val := append(binary.BigEndian.AppendUint16(netip.MustParseAddr(tc.ep).AsSlice(), tc.epPort), 0, 0)
		if got := stale(key, val); got != tc.wantStale {
			t.Errorf("%s: stale = %v", tc.desc, got)
		}
	}
}
