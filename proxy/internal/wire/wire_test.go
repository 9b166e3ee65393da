package wire

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"braid/proxy/internal/dest"
)

func aeadPair(t testing.TB) (*Sealer, *Opener) {
	var k [32]byte
	k[0] = 1
	a, err := NewAEAD(k)
	if err != nil {
		t.Fatal(err)
	}
	return NewSealer(a), NewOpener(a)
}

func TestFrameRoundTripAndTamper(t *testing.T) {
	s, o := aeadPair(t)
	var stream []byte
	stream = s.Append(stream, 0, []byte("hello"))
	stream = s.Append(stream, FlagFIN, nil)
	r := bytes.NewReader(stream)
	f, p, err := o.ReadFrame(r, nil)
	if err != nil || f != 0 || string(p) != "hello" {
		t.Fatalf("frame 1: %v %q %v", f, p, err)
	}
	f, p, err = o.ReadFrame(r, nil)
	if err != nil || f != FlagFIN || len(p) != 0 {
		t.Fatalf("frame 2: %v %q %v", f, p, err)
	}
	// Any flipped bit fails authentication.
	for i := range stream[:len(stream)/2] {
		s2, o2 := aeadPair(t)
		_ = s2
		bad := append([]byte{}, stream...)
		bad[i] ^= 0x40
		if _, _, err := o2.ReadFrame(bytes.NewReader(bad), nil); err == nil {
			t.Fatalf("tampered byte %d accepted", i)
		}
	}
	// Replaying the first frame as second fails (nonce counter).
	_, o3 := aeadPair(t)
	first := stream[:HeaderLen+5+TagLen]
	rr := bytes.NewReader(append(append([]byte{}, first...), first...))
	if _, _, err := o3.ReadFrame(rr, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := o3.ReadFrame(rr, nil); !errors.Is(err, ErrAuth) {
		t.Fatalf("replayed frame: %v", err)
	}
}

// sentThenClosed is a TCP connection whose peer sends b and closes.
func sentThenClosed(t *testing.T, b []byte) *net.TCPConn {
	c, peer := tcpPair(t)
	go func() {
		peer.Write(b)
		peer.Close()
	}()
	return c
}

func TestConnHalfCloseAndTruncation(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		s, o := aeadPair(t)
		_ = o
		wc := NewConn(c.(*net.TCPConn), nil, s)
		wc.Write(bytes.Repeat([]byte("x"), 100000))
		wc.CloseWrite()
		// Then a truncated stream: raw close without FIN is tested below.
		io.Copy(io.Discard, c)
		c.Close()
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, o := aeadPair(t)
	rc := NewConn(c.(*net.TCPConn), o, nil)
	got, err := io.ReadAll(rc)
	if err != nil || len(got) != 100000 {
		t.Fatalf("read %d bytes, err %v", len(got), err)
	}

	// Truncation: raw EOF without FIN.
	_, o2 := aeadPair(t)
	s2, _ := aeadPair(t)
	trunc := s2.Append(nil, 0, []byte("partial"))
	rc2 := NewConn(sentThenClosed(t, trunc), o2, nil)
	if _, err := io.ReadAll(rc2); !errors.Is(err, ErrTruncated) {
		t.Fatalf("truncated stream: %v", err)
	}
}

func TestRequestRoundTrip(t *testing.T) {
	for _, d := range []dest.Addr{
		{Name: "example.com", Port: 443},
		{IP: netip.MustParseAddr("192.0.2.7"), Port: 80},
		{IP: netip.MustParseAddr("2001:db8::7"), Port: 8080},
	} {
		got, err := ParseRequest(AppendRequest(nil, d))
		if err != nil || got != d {
			t.Errorf("%v: got %v, %v", d, got, err)
		}
	}
	for _, bad := range [][]byte{nil, {2, 1}, {1, 9, 0, 0}, {1, 3, 5, 'a', 0, 80}, {1, 1, 1, 2, 3, 4, 0, 0}, {1, 3, 3, 'a', ' ', 'b', 0, 80}} {
		if _, err := ParseRequest(bad); err == nil {
			t.Errorf("ParseRequest(%v) accepted", bad)
		}
	}
	if s, err := ParseReply(AppendReply(nil, StatusNotAllowed)); err != nil || s != StatusNotAllowed {
		t.Fatal(s, err)
	}
}

func FuzzParseRequest(f *testing.F) {
	f.Add(AppendRequest(nil, dest.Addr{Name: "example.com", Port: 443}))
	f.Add(AppendRequest(nil, dest.Addr{IP: netip.MustParseAddr("192.0.2.7"), Port: 80}))
	// A 255-byte name: the length that once wrapped (see
	// TestRequestWithLongestNameIsRefused).
	f.Add(AppendRequest(nil, dest.Addr{Name: strings.Repeat("a", 255), Port: 1}))
	f.Fuzz(func(t *testing.T, in []byte) {
		d, err := ParseRequest(in)
		if err != nil {
			return
		}
		if d.Validate() != nil {
			t.Fatalf("invalid destination accepted: %+v", d)
		}
		if d2, err := ParseRequest(AppendRequest(nil, d)); err != nil || d2 != d {
			t.Fatalf("round trip: %+v -> %+v %v", d, d2, err)
		}
	})
}

func FuzzReadFrame(f *testing.F) {
	s, _ := aeadPair(f)
	f.Add(s.Append(nil, 0, []byte("data")))
	f.Add([]byte{0, 1, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		_, o := aeadPair(t)
		r := bytes.NewReader(in)
		for i := 0; i < 4; i++ {
			if _, _, err := o.ReadFrame(r, nil); err != nil {
				return
			}
		}
	})
}

// Held bytes (the server's answer) go out in front of the first frame, in
// the same write, alone once the wait has passed, or before the connection
// closes.
func TestConnHold(t *testing.T) {
	for _, tc := range []struct {
		name         string
		write, close bool
	}{{"with the first frame", true, false}, {"alone after the wait", false, false}, {"before a close", false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			peer, err := ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			defer peer.Close()
			s, o := aeadPair(t)
			wc := NewConn(c.(*net.TCPConn), nil, s)
			wait := time.Hour
			if !tc.write && !tc.close {
				wait = 20 * time.Millisecond
			}
			wc.Hold([]byte("ANSWER"), wait)
			if tc.write {
				if _, err := wc.Write([]byte("data")); err != nil {
					t.Fatal(err)
				}
			}
			if tc.close {
				wc.Close()
			}
			peer.SetReadDeadline(time.Now().Add(5 * time.Second))
			got := make([]byte, 6)
			if _, err := io.ReadFull(peer, got); err != nil || string(got) != "ANSWER" {
				t.Fatalf("held bytes: %q, %v", got, err)
			}
			if tc.write {
				if _, p, err := o.ReadFrame(peer, nil); err != nil || string(p) != "data" {
					t.Fatalf("frame after the held bytes: %q, %v", p, err)
				}
			}
			if tc.close {
				if n, err := peer.Read(make([]byte, 1)); n != 0 || err != io.EOF {
					t.Fatalf("after the held bytes: %d bytes, %v; want the end of the stream", n, err)
				}
			} else if err := wc.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Nothing of a frame is in clear: a stream of small frames of zeros, FIN
// flags included, has the byte histogram of random data (v1's clear
// lengths and flags made a third of such a stream predictable).
func TestFramesLookRandom(t *testing.T) {
	s, _ := aeadPair(t)
	var stream []byte
	for len(stream) < 1<<16 {
		stream = s.Append(stream, 0, make([]byte, 5))
		stream = s.Append(stream, FlagFIN, nil)
	}
	var hist [256]float64
	for _, b := range stream {
		hist[b]++
	}
	want := float64(len(stream)) / 256
	chi2 := 0.0
	for _, n := range hist {
		chi2 += (n - want) * (n - want) / want
	}
	// 255 degrees of freedom: p = 1e-6 at about 370.
	if chi2 > 370 {
		t.Fatalf("frame bytes are not uniform: chi-square %.0f over 255 degrees of freedom", chi2)
	}
}

// Key updates: to a key given beforehand (early -> session key), and
// automatic ones (Noise REKEY) every RekeyFrames frames; the receiver
// follows both, and frames after an update are not readable under the
// old key.
func TestKeyUpdates(t *testing.T) {
	old := RekeyFrames
	RekeyFrames = 3
	defer func() { RekeyFrames = old }()
	s, o := aeadPair(t)
	var k2 [32]byte
	k2[0] = 2
	next, _ := NewAEAD(k2)
	var stream []byte
	stream = s.Append(stream, 0, []byte("early"))
	stream = s.Update(stream, next)
	afterUpdate := len(stream)
	for i := 0; i < 10; i++ {
		stream = s.Append(stream, 0, []byte{byte(i)})
	}
	stream = s.Append(stream, FlagFIN, nil)

	o.SetNext(next)
	r := bytes.NewReader(stream)
	var got []byte
	updates := 0
	for {
		f, p, err := o.ReadFrame(r, nil)
		if err != nil {
			t.Fatalf("after %q: %v", got, err)
		}
		if f&FlagKeyUpdate != 0 {
			updates++
		}
		got = append(got, p...)
		if f&FlagFIN != 0 {
			break
		}
	}
	if want := "early\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09"; string(got) != want || updates != 4 {
		t.Fatalf("read %q with %d key updates, want %q with 4 (1 given, 3 automatic)", got, updates, want)
	}
	// Under the first key (nonces from zero, as after an update) the
	// frames that follow the update do not open.
	_, stale := aeadPair(t)
	if _, _, err := stale.ReadFrame(bytes.NewReader(stream[afterUpdate:]), nil); !errors.Is(err, ErrAuth) {
		t.Fatalf("frame after a key update opened with the old key: %v", err)
	}
}

// A 255-byte name (longer than any valid host name) made ParseRequest
// panic: 1+len in byte arithmetic wrapped to 0. A key holder's request
// could crash the relay; it must be refused like any invalid name.
func TestRequestWithLongestNameIsRefused(t *testing.T) {
	b := AppendRequest(nil, dest.Addr{Name: strings.Repeat("a", 255), Port: 1})
	if _, err := ParseRequest(b); !errors.Is(err, ErrMalformed) {
		t.Fatalf("255-byte name: %v", err)
	}
	label := strings.Repeat("a", 63) + "."
	d := dest.Addr{Name: strings.Repeat(label, 3) + strings.Repeat("b", 61), Port: 443} // 253: the longest valid
	if got, err := ParseRequest(AppendRequest(nil, d)); err != nil || got != d {
		t.Fatalf("253-byte name: %v, %v", got, err)
	}
}
