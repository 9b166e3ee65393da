package client

import (
	"fmt"
	"testing"
	"time"
)

func TestReachedSet(t *testing.T) {
	var r reachedSet
	now := time.Now()
	if r.recent("a:1", now) {
		t.Fatal("an unknown destination is recent")
	}
	r.add("a:1", now)
	if !r.recent("a:1", now.Add(reachedTTL-time.Second)) || r.recent("a:1", now.Add(reachedTTL)) {
		t.Fatal("recent does not follow reachedTTL")
	}
	r.forget("a:1")
	if r.recent("a:1", now) {
		t.Fatal("a forgotten destination is recent")
	}
	// Full: a new destination drops the stalest, and the set stays bounded.
	for i := range reachedMax {
		r.add(fmt.Sprintf("h%d:1", i), now.Add(time.Duration(i)*time.Millisecond))
	}
	r.add("new:1", now.Add(time.Hour/12))
	if len(r.at) != reachedMax || r.recent("h0:1", now) || !r.recent("h1:1", now) || !r.recent("new:1", now.Add(time.Hour/12)) {
		t.Fatalf("after a full set took one more: %d entries", len(r.at))
	}
}
