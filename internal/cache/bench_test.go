package cache

import (
	"bytes"
	"encoding/gob"
	"reflect"
	"testing"

	"netspec.dev/netspec/internal/gen/gentree"
	"netspec.dev/netspec/schema"
)

// benchResults validates a generated tree of 1,000 services and 2,000 pods
// and returns its results.
func benchResults(b *testing.B) []*schema.UnitResult {
	b.Helper()
	root := b.TempDir()
	if err := gentree.Write(root, gentree.Config{Services: 1000, PodsPerService: 2}); err != nil {
		b.Fatal(err)
	}
	m := NewMemory()
	if _, err := schema.Load(root, schema.Options{Cache: m}); err != nil {
		b.Fatal(err)
	}
	var rs []*schema.UnitResult
	for _, e := range m.entries {
		rs = append(rs, e.r)
	}
	return rs
}

// BenchmarkDecode compares the codec with encoding/gob on the results of a
// tree (one gob stream for all of them, its best case).
func BenchmarkDecode(b *testing.B) {
	rs := benchResults(b)
	b.Run("codec", func(b *testing.B) {
		var raws [][]byte
		size := 0
		for _, r := range rs {
			raw, err := encodeResult(nil, r)
			if err != nil {
				b.Fatal(err)
			}
			raws = append(raws, raw)
			size += len(raw)
		}
		b.ReportAllocs()
		for b.Loop() {
			for _, raw := range raws {
				if _, err := decodeResult(raw); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(size), "bytes")
	})
	b.Run("gob", func(b *testing.B) {
		var buf bytes.Buffer
		if err := gob.NewEncoder(&buf).Encode(rs); err != nil {
			b.Fatal(err)
		}
		var check []*schema.UnitResult
		if err := gob.NewDecoder(bytes.NewReader(buf.Bytes())).Decode(&check); err != nil {
			b.Fatal(err)
		}
		if len(check) != len(rs) || !reflect.DeepEqual(check[0].Objects[0].Meta(), rs[0].Objects[0].Meta()) {
			b.Fatal("gob round trip differs")
		}
		b.ReportAllocs()
		for b.Loop() {
			var out []*schema.UnitResult
			if err := gob.NewDecoder(bytes.NewReader(buf.Bytes())).Decode(&out); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(buf.Len()), "bytes")
	})
}
