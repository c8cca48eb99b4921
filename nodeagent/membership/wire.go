package membership

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"net/netip"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

// The few parts of memberlist's (v0.7) wire format the source check reads:
// message types, the AES-GCM envelope, CRC and compound framing, and the
// messages that carry a member's address or a probe's sequence number.
// memberlist keeps these unexported; they are part of its protocol, so they
// do not change within a protocol version.

type msgType uint8

const (
	msgPing         msgType = 0
	msgIndirectPing msgType = 1
	msgAck          msgType = 2
	msgAlive        msgType = 4
	msgPushPull     msgType = 6
	msgCompound     msgType = 7
	msgCompress     msgType = 9
	msgEncrypt      msgType = 10
	msgCRC          msgType = 12
	msgLabel        msgType = 244
)

// maxStreamBytes is memberlist's own limit on a push/pull state.
const maxStreamBytes = 20 * 1024 * 1024

const (
	nonceSize = 12
	tagSize   = 16
)

// aliveMsg is memberlist's alive: a member's claim to be up at Addr:Port.
type aliveMsg struct {
	Incarnation uint32
	Node        string
	Addr        []byte
	Port        uint16
	Meta        []byte
	Vsn         []uint8
}

// seqMsg reads the sequence number of a ping, indirect ping or ack.
type seqMsg struct {
	SeqNo uint32
}

type pushPullHeader struct {
	Nodes        int
	UserStateLen int
	Join         bool
}

// pushNodeState is one member in a push/pull; State 0 is alive.
type pushNodeState struct {
	Name        string
	Addr        []byte
	Port        uint16
	Meta        []byte
	Incarnation uint32
	State       int
	Vsn         []uint8
}

const stateAlive = 0

var errCompressed = errors.New("compressed message (no agent compresses)")

func decodeMsg(buf []byte, out any) error {
	return codec.NewDecoder(bytes.NewReader(buf), &codec.MsgpackHandle{}).Decode(out)
}

// open decrypts a memberlist envelope (version byte, nonce, sealed text)
// with any of keys; aad is the stream header, empty for packets.
func open(keys [][]byte, msg, aad []byte) ([]byte, error) {
	if len(msg) < 1+nonceSize+tagSize || msg[0] > 1 {
		return nil, errors.New("not an encrypted message")
	}
	for _, key := range keys {
		gcm, err := newGCM(key)
		if err != nil {
			return nil, err
		}
		plain, err := gcm.Open(nil, msg[1:1+nonceSize], msg[1+nonceSize:], aad)
		if err != nil {
			continue
		}
		if msg[0] == 0 { // version 0 pads with PKCS7
			if len(plain) == 0 || int(plain[len(plain)-1]) > len(plain) {
				return nil, errors.New("bad padding")
			}
			plain = plain[:len(plain)-int(plain[len(plain)-1])]
		}
		return plain, nil
	}
	return nil, errors.New("no key opens it")
}

// seal encrypts plain with key in memberlist's version 1 envelope.
func seal(key, plain, aad []byte) ([]byte, error) {
	gcm, err := newGCM(key)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 1+nonceSize, 1+nonceSize+len(plain)+tagSize)
	out[0] = 1
	if _, err := rand.Read(out[1:]); err != nil {
		return nil, err
	}
	return gcm.Seal(out, out[1:1+nonceSize], plain, aad), nil
}

func newGCM(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// messages splits a decrypted packet into its messages (type byte first),
// through CRC and compound framing.
func messages(plain []byte) ([][]byte, error) {
	if len(plain) == 0 {
		return nil, errors.New("empty message")
	}
	switch msgType(plain[0]) {
	case msgCRC:
		if len(plain) < 5 || crc32.ChecksumIEEE(plain[5:]) != binary.BigEndian.Uint32(plain[1:5]) {
			return nil, errors.New("bad checksum")
		}
		return messages(plain[5:])
	case msgCompress:
		return nil, errCompressed
	case msgCompound:
		if len(plain) < 2 {
			return nil, errors.New("truncated compound")
		}
		n, rest := int(plain[1]), plain[2:]
		if len(rest) < 2*n {
			return nil, errors.New("truncated compound")
		}
		lengths, rest := rest[:2*n], rest[2*n:]
		var out [][]byte
		for i := range n {
			l := int(binary.BigEndian.Uint16(lengths[2*i:]))
			if len(rest) < l {
				return nil, errors.New("truncated compound")
			}
			parts, err := messages(rest[:l])
			if err != nil {
				return nil, err
			}
			out, rest = append(out, parts...), rest[l:]
		}
		return out, nil
	}
	return [][]byte{plain}, nil
}

// decodePushPull reads a push/pull (after its type byte): the members it
// lists and the user state behind them.
func decodePushPull(buf []byte) (pushPullHeader, []pushNodeState, []byte, error) {
	r := bytes.NewReader(buf)
	dec := codec.NewDecoder(r, &codec.MsgpackHandle{})
	var h pushPullHeader
	if err := dec.Decode(&h); err != nil {
		return h, nil, nil, fmt.Errorf("push/pull header: %w", err)
	}
	if h.Nodes < 0 || h.Nodes > len(buf) {
		return h, nil, nil, fmt.Errorf("push/pull of %d members", h.Nodes)
	}
	states := make([]pushNodeState, h.Nodes)
	for i := range states {
		if err := dec.Decode(&states[i]); err != nil {
			return h, nil, nil, fmt.Errorf("push/pull member %d: %w", i, err)
		}
	}
	user := make([]byte, r.Len())
	_, _ = r.Read(user)
	return h, states, user, nil
}

func encodePushPull(h pushPullHeader, states []pushNodeState, user []byte) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte(byte(msgPushPull))
	enc := codec.NewEncoder(&buf, &codec.MsgpackHandle{})
	h.Nodes = len(states)
	if err := enc.Encode(&h); err != nil {
		return nil, err
	}
	for i := range states {
		if err := enc.Encode(&states[i]); err != nil {
			return nil, err
		}
	}
	buf.Write(user)
	return buf.Bytes(), nil
}

// addrOf is a member's advertised address, unmapped.
func addrOf(b []byte) netip.Addr {
	a, _ := netip.AddrFromSlice(b)
	return a.Unmap()
}
