package imageref

import "testing"

// BenchmarkCheck measures the check of one reference, which Render makes
// for every image field.
func BenchmarkCheck(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if err := Check("registry.example:5000/shop/web:1.4@" + dg); err != nil {
			b.Fatal(err)
		}
	}
}
