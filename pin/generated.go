package pin

import "time"

// Generated is what a deterministic render (digestpin template) generated
// that its report names: the certificates, with the time each is
// re-issued, and every use of something that still varies from one render
// to the next.
type Generated struct {
	Certificates []GeneratedCertificate `json:"certificates,omitempty"`
	Varying      []GeneratedUse         `json:"varying,omitempty"`
	// Ordered are the calls whose values follow the order they run in
	// (equal calls on one line, entries of a list with no name): adding or
	// removing one, or an entry before it, hands values on to others.
	Ordered []GeneratedUse `json:"ordered,omitempty"`
}

// GeneratedCertificate is one certificate a chart generated.
type GeneratedCertificate struct {
	// Template is the chart template the certificate was made in.
	Template string `json:"template"`
	// Function is the template function that made it (genCA, ...).
	Function   string    `json:"function"`
	CommonName string    `json:"commonName"`
	NotBefore  time.Time `json:"notBefore"`
	NotAfter   time.Time `json:"notAfter"`
	// ReissueAt is when a render first makes a new certificate in its
	// place, before NotAfter.
	ReissueAt time.Time `json:"reissueAt"`
}

// GeneratedUse is one call of something that varies from one render to
// the next (now, lookup, ...).
type GeneratedUse struct {
	// Template says where: the template file, and the named template the
	// call is in when that is another.
	Template string `json:"template"`
	Function string `json:"function"`
}
