// Package loadgen is the traffic source/sink used by braid-proxy's
// end-to-end tests and benchmark (not by the proxy itself).
//
// A client sends a 28-byte header (magic "BLG1", seed, download size,
// upload size, each uint64 big endian; the top bit of the seed selects the
// unverified fast pattern, the next one says the client half-closes), then
// uploads its bytes and, normally, half-closes. The server concurrently
// sends the download bytes, reads and checks the upload (and then waits for
// EOF if the client half-closes), then writes a 9-byte trailer (0 = upload
// intact, received count) and closes. Without half-close the exchange also
// works through proxies that cannot forward a FIN (the benchmark uses it
// for every variant so the reference proxy can take part). Both directions are a deterministic ChaCha8 stream of
// the seed, so either end checks the other byte for byte, and the trailer
// after the client's half-close proves half-close works end to end.
//
// A header with magic "BLGE" instead starts an echo connection: the server
// sends back every byte it receives until EOF (the held connections of
// the relay-capacity benchmark, capacity.go).
package loadgen

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sort"
	"sync"
	"syscall"
	"time"
)

const (
	headerLen  = 28
	trailerLen = 9
	fastBit    = uint64(1) << 63
	halfBit    = uint64(1) << 62
	chunk      = 16 * 1024
)

var magic = [4]byte{'B', 'L', 'G', '1'}

// echoMagic starts a held connection (capacity.go): the server echoes
// every byte until EOF; the rest of its header is ignored.
var echoMagic = [4]byte{'B', 'L', 'G', 'E'}

// errShortStream: the peer ended a stream before its announced length.
var errShortStream = errors.New("stream ended")

// stream produces the data for one direction.
type stream struct {
	rng  *rand.ChaCha8
	fast []byte
	off  int
}

var fastBlock = func() []byte {
	b := make([]byte, 1<<20)
	rand.NewChaCha8([32]byte{1}).Read(b)
	return b
}()

func newStream(seed uint64, dir byte) *stream {
	if seed&fastBit != 0 {
		return &stream{fast: fastBlock}
	}
	var s [32]byte
	binary.BigEndian.PutUint64(s[:], seed)
	s[8] = dir
	return &stream{rng: rand.NewChaCha8(s)}
}

func (s *stream) fill(p []byte) {
	if s.fast != nil {
		for n := 0; n < len(p); {
			c := copy(p[n:], s.fast[s.off:])
			n += c
			s.off = (s.off + c) % len(s.fast)
		}
		return
	}
	s.rng.Read(p)
}

func sendStream(w io.Writer, st *stream, n uint64) error {
	buf := make([]byte, chunk)
	for n > 0 {
		c := min(n, uint64(len(buf)))
		st.fill(buf[:c])
		if _, err := w.Write(buf[:c]); err != nil {
			return err
		}
		n -= c
	}
	return nil
}

// checkStream reads exactly n bytes (or to EOF if n < 0) and compares them
// with st unless st is the fast pattern. It returns the bytes read.
func checkStream(r io.Reader, st *stream, n int64, first func()) (int64, error) {
	buf := make([]byte, chunk)
	want := make([]byte, chunk)
	var got int64
	for n < 0 || got < n {
		want := want
		lim := int64(len(buf))
		if n >= 0 {
			lim = min(lim, n-got)
		}
		k, err := r.Read(buf[:lim])
		if k > 0 {
			if got == 0 && first != nil {
				first()
			}
			if st.fast == nil {
				st.fill(want[:k])
				if !bytes.Equal(buf[:k], want[:k]) {
					return got, fmt.Errorf("data mismatch at byte %d", got)
				}
			}
			got += int64(k)
		}
		if err == io.EOF {
			if n >= 0 && got < n {
				return got, fmt.Errorf("%w after %d of %d bytes", errShortStream, got, n)
			}
			return got, nil
		}
		if err != nil {
			return got, err
		}
	}
	return got, nil
}

// Serve answers loadgen clients on ln until it is closed.
func Serve(ln net.Listener) error {
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go handle(c)
	}
}

func handle(c net.Conn) {
	defer c.Close()
	var hdr [headerLen]byte
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		return
	}
	c.SetReadDeadline(time.Time{})
	if [4]byte(hdr[:4]) == echoMagic {
		echo(c)
		return
	}
	if [4]byte(hdr[:4]) != magic {
		return
	}
	seed := binary.BigEndian.Uint64(hdr[4:])
	down := binary.BigEndian.Uint64(hdr[12:])
	up := binary.BigEndian.Uint64(hdr[20:])
	var wg sync.WaitGroup
	var sendErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		sendErr = sendStream(c, newStream(seed, 'd'), down)
	}()
	got, err := checkStream(c, newStream(seed, 'u'), int64(up), nil)
	if err == nil && seed&halfBit != 0 {
		// The client's FIN must arrive through the proxy.
		if n, rerr := c.Read(make([]byte, 1)); n != 0 || rerr != io.EOF {
			err = errors.New("no EOF after upload")
		}
	}
	wg.Wait()
	if sendErr != nil {
		return
	}
	var tr [trailerLen]byte
	if err != nil || uint64(got) != up {
		tr[0] = 1
	}
	binary.BigEndian.PutUint64(tr[1:], uint64(got))
	c.Write(tr[:])
}

// echo sends back what c receives, until EOF or an error. The buffer is
// small: a held connection's echoes are a few bytes, and a sink holds
// thousands of them.
func echo(c net.Conn) {
	buf := make([]byte, 512)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// Dialer opens a connection to the target (directly or through SOCKS).
type Dialer func(ctx context.Context) (net.Conn, error)

// Result of one transfer.
type Result struct {
	Setup    time.Duration // until the connection is usable
	TTFB     time.Duration // until the first downloaded byte
	Transfer time.Duration // from usable to trailer
	Bytes    int64
	Err      error
}

// Options of a transfer.
type Options struct {
	Verify      bool // check every byte (else a fast fixed pattern)
	NoHalfClose bool // do not shut the write side after the upload
}

// Transfer runs one exchange over a connection from dial.
func Transfer(ctx context.Context, dial Dialer, seed, down, up uint64, verify bool) Result {
	return TransferOpts(ctx, dial, seed, down, up, Options{Verify: verify})
}

// TransferOpts is Transfer with all options.
func TransferOpts(ctx context.Context, dial Dialer, seed, down, up uint64, o Options) Result {
	var res Result
	seed &^= fastBit | halfBit
	if !o.Verify {
		seed |= fastBit
	}
	if !o.NoHalfClose {
		seed |= halfBit
	}
	start := time.Now()
	c, err := dial(ctx)
	if err != nil {
		res.Err = fmt.Errorf("setup: %w", err)
		return res
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	res.Setup = time.Since(start)
	t0 := time.Now()
	var hdr [headerLen]byte
	copy(hdr[:], magic[:])
	binary.BigEndian.PutUint64(hdr[4:], seed)
	binary.BigEndian.PutUint64(hdr[12:], down)
	binary.BigEndian.PutUint64(hdr[20:], up)
	if _, err := c.Write(hdr[:]); err != nil {
		res.Err = fmt.Errorf("header: %w", err)
		return res
	}
	upErr := make(chan error, 1)
	go func() {
		err := sendStream(c, newStream(seed, 'u'), up)
		if err == nil && !o.NoHalfClose {
			if cw, ok := c.(interface{ CloseWrite() error }); ok {
				err = cw.CloseWrite()
			}
		}
		upErr <- err
	}()
	got, err := checkStream(c, newStream(seed, 'd'), int64(down), func() { res.TTFB = time.Since(start) })
	res.Bytes = got
	if err != nil {
		res.Err = fmt.Errorf("download: %w", err)
		// The kernel reports a reset to one call only: if the upload's
		// write took it, the download merely sees the stream end. The
		// reset is the truth about how the connection ended.
		if errors.Is(err, errShortStream) {
			select {
			case uerr := <-upErr:
				if errors.Is(uerr, syscall.ECONNRESET) {
					res.Err = fmt.Errorf("upload: %w", uerr)
				}
			case <-time.After(time.Second):
			}
		}
		return res
	}
	if err := <-upErr; err != nil {
		res.Err = fmt.Errorf("upload: %w", err)
		return res
	}
	var tr [trailerLen]byte
	if _, err := io.ReadFull(c, tr[:]); err != nil {
		res.Err = fmt.Errorf("trailer (half-close not propagated?): %w", err)
		return res
	}
	if tr[0] != 0 || binary.BigEndian.Uint64(tr[1:]) != up {
		res.Err = fmt.Errorf("server saw a corrupt upload (%d of %d bytes)", binary.BigEndian.Uint64(tr[1:]), up)
		return res
	}
	if n, _ := c.Read(tr[:1]); n != 0 {
		res.Err = errors.New("data after trailer")
		return res
	}
	res.Transfer = time.Since(t0)
	res.Bytes += int64(up)
	return res
}

// Summary aggregates many results.
type Summary struct {
	Conns       int     `json:"conns"`
	Failed      int     `json:"failed"`
	FirstError  string  `json:"first_error,omitempty"`
	Bytes       int64   `json:"bytes"`
	ElapsedS    float64 `json:"elapsed_s"`
	Mbps        float64 `json:"mbit_per_s"`          // all bytes / wall time
	XferMbps    float64 `json:"transfer_mbit_per_s"` // per-connection, setup excluded (median)
	SetupMedMs  float64 `json:"setup_median_ms"`
	SetupP90Ms  float64 `json:"setup_p90_ms"`
	SetupMeanMs float64 `json:"setup_mean_ms"`
	TTFBMedMs   float64 `json:"ttfb_median_ms"`
}

// Run performs n transfers with the given concurrency and summarises.
func Run(ctx context.Context, dial Dialer, n, concurrency int, down, up uint64, verify bool) Summary {
	return RunOpts(ctx, dial, n, concurrency, down, up, Options{Verify: verify})
}

// RunOpts is Run with all options.
func RunOpts(ctx context.Context, dial Dialer, n, concurrency int, down, up uint64, o Options) Summary {
	results := make([]Result, n)
	sem := make(chan struct{}, concurrency)
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			results[i] = TransferOpts(ctx, dial, uint64(i)+1, down, up, o)
		}(i)
	}
	wg.Wait()
	el := time.Since(start)
	s := Summary{Conns: n, ElapsedS: el.Seconds()}
	var setups, ttfbs, rates []float64
	for _, r := range results {
		if r.Err != nil {
			s.Failed++
			if s.FirstError == "" {
				s.FirstError = r.Err.Error()
			}
			continue
		}
		s.Bytes += r.Bytes
		setups = append(setups, float64(r.Setup.Microseconds())/1000)
		if r.TTFB > 0 {
			ttfbs = append(ttfbs, float64(r.TTFB.Microseconds())/1000)
		}
		if r.Transfer > 0 {
			rates = append(rates, float64(r.Bytes)*8/1e6/r.Transfer.Seconds())
		}
	}
	s.Mbps = float64(s.Bytes) * 8 / 1e6 / el.Seconds()
	s.SetupMedMs = quantile(setups, 0.5)
	s.SetupP90Ms = quantile(setups, 0.9)
	s.SetupMeanMs = mean(setups)
	s.TTFBMedMs = quantile(ttfbs, 0.5)
	s.XferMbps = quantile(rates, 0.5)
	return s
}

func quantile(v []float64, q float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = append([]float64(nil), v...)
	sort.Float64s(v)
	return v[int(q*float64(len(v)-1)+0.5)]
}

func mean(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	t := 0.0
	for _, x := range v {
		t += x
	}
	return t / float64(len(v))
}
