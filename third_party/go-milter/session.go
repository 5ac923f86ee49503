package milter

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/textproto"
	"runtime/debug"
	"strings"
	"time"
)

var errCloseSession = errors.New("Stop current milter processing")

// maxPacketSize limits the command byte and payload before allocation.
const maxPacketSize = 1 << 20

// milterSession keeps session state during MTA communication
type milterSession struct {
	server   *Server
	actions  OptAction
	protocol OptProtocol
	conn     net.Conn
	headers  textproto.MIMEHeader
	macros   map[string]string
	backend  Milter

	// buf holds the packet being read, and msg the packet read, both
	// reused from one packet to the next, so that a session makes no
	// garbage for the packets it reads; buf is let go past
	// keepPacketBuffer bytes. (spamd patch)
	buf []byte
	msg Message
}

// keepPacketBuffer is the largest packet buffer a session keeps for the
// next packet: room for a body chunk as Postfix and Sendmail send it, up
// to 64 KiB, and its command byte. (spamd patch)
const keepPacketBuffer = 64<<10 + 1

// ReadPacket reads incoming milter packet. The packet, its data
// included, is the session's until the next ReadPacket. (spamd patch)
func (c *milterSession) ReadPacket() (*Message, error) {
	data, err := readPacketData(c.conn, 0, c.buf[:0])
	if cap(data) <= keepPacketBuffer {
		c.buf = data
	} else {
		c.buf = nil
	}
	if err != nil {
		return nil, err
	}
	c.msg = Message{Code: data[0], Data: data[1:]}
	return &c.msg, nil
}

func readPacket(conn net.Conn, timeout time.Duration) (*Message, error) {
	data, err := readPacketData(conn, timeout, nil)
	if err != nil {
		return nil, err
	}

	// prepare response data
	message := Message{
		Code: data[0],
		Data: data[1:],
	}

	return &message, nil
}

// readPacketData reads a packet, its command byte and data, into buf,
// which it grows as needed, and returns it; it returns buf, with what it
// read, on an error too, so that its room can be used again. (spamd
// patch)
func readPacketData(conn net.Conn, timeout time.Duration, buf []byte) ([]byte, error) {
	if timeout != 0 {
		conn.SetReadDeadline(time.Now().Add(timeout))
		defer conn.SetReadDeadline(time.Time{})
	}

	// read packet length
	var head [4]byte
	if _, err := io.ReadFull(conn, head[:]); err != nil {
		return buf, err
	}
	length := binary.BigEndian.Uint32(head[:])
	if length == 0 {
		return buf, errors.New("milter: invalid zero-length packet")
	}
	if length > maxPacketSize {
		return buf, fmt.Errorf("milter: packet length %d exceeds %d bytes", length, maxPacketSize)
	}

	// read packet data, growing the buffer as the data arrives: a peer
	// that announces a large packet and sends it slowly, or never, holds
	// no more memory than it has sent. (spamd patch)
	return readFull(conn, int(length), buf)
}

// firstRead is the most readFull allocates before any data has arrived.
const firstRead = 4096

// readFull reads exactly n bytes from r into buf[:n], growing buf as the
// data arrives: by firstRead at first, then at most doubling per read, so
// that its size follows what was received rather than what was
// announced. It returns buf holding what was read, on an error too.
// (spamd patch)
func readFull(r io.Reader, n int, buf []byte) ([]byte, error) {
	data := buf[:0]
	if cap(data) < n && cap(data) < firstRead {
		size := n
		if size > firstRead {
			size = firstRead
		}
		data = make([]byte, 0, size)
	}
	for len(data) < n {
		if len(data) == cap(data) {
			grow := cap(data)
			if grow < firstRead {
				grow = firstRead
			}
			if rest := n - len(data); grow > rest {
				grow = rest
			}
			bigger := make([]byte, len(data), len(data)+grow)
			copy(bigger, data)
			data = bigger
		}
		end := cap(data)
		if end > n {
			end = n
		}
		m, err := io.ReadFull(r, data[len(data):end])
		data = data[:len(data)+m]
		if err != nil {
			if err == io.EOF && len(data) > 0 {
				err = io.ErrUnexpectedEOF
			}
			return data, err
		}
	}
	return data, nil
}

// WritePacket sends a milter response packet to socket stream
func (m *milterSession) WritePacket(msg *Message) error {
	return writePacket(m.conn, msg, 0)
}

func writePacket(conn net.Conn, msg *Message, timeout time.Duration) error {
	if timeout != 0 {
		conn.SetWriteDeadline(time.Now().Add(timeout))
		defer conn.SetWriteDeadline(time.Time{})
	}

	buffer := bufio.NewWriter(conn)

	// calculate and write response length
	length := uint32(len(msg.Data) + 1)
	if err := binary.Write(buffer, binary.BigEndian, length); err != nil {
		return err
	}

	// write response code
	if err := buffer.WriteByte(msg.Code); err != nil {
		return err
	}

	// write response data
	if _, err := buffer.Write(msg.Data); err != nil {
		return err
	}

	// flush data to network socket stream
	if err := buffer.Flush(); err != nil {
		return err
	}

	return nil
}

// Process processes incoming milter commands
func (m *milterSession) Process(msg *Message) (Response, error) {
	switch Code(msg.Code) {
	case CodeAbort:
		// abort current message and start over
		defer func() {
			m.headers = nil
			m.macros = nil
		}()
		return nil, m.backend.Abort(newModifier(m))

	case CodeBody:
		// body chunk
		return m.backend.BodyChunk(msg.Data, newModifier(m))

	case CodeConn:
		// new connection, get hostname
		hostname := readCString(msg.Data)
		if len(msg.Data) < len(hostname)+2 {
			return nil, errors.New("milter: malformed connect command")
		}
		msg.Data = msg.Data[len(hostname)+1:]
		// get protocol family
		protocolFamily := msg.Data[0]
		msg.Data = msg.Data[1:]
		// get port
		var port uint16
		if protocolFamily == '4' || protocolFamily == '6' {
			if len(msg.Data) < 2 {
				return RespTempFail, nil
			}
			port = binary.BigEndian.Uint16(msg.Data)
			msg.Data = msg.Data[2:]
		}
		// get address
		address := readCString(msg.Data)
		// convert address and port to human readable string
		family := map[byte]string{
			'U': "unknown",
			'L': "unix",
			'4': "tcp4",
			'6': "tcp6",
		}
		// run handler and return
		return m.backend.Connect(
			hostname,
			family[protocolFamily],
			port,
			net.ParseIP(address),
			newModifier(m))

	case CodeMacro:
		if len(msg.Data) == 0 {
			return nil, errors.New("milter: malformed macro command")
		}
		// define macros
		m.macros = make(map[string]string)
		// convert data to Go strings
		data := decodeCStrings(msg.Data[1:])
		if len(data) != 0 {
			if len(data)%2 == 1 {
				data = append(data, "")
			}

			// store data in a map
			for i := 0; i < len(data); i += 2 {
				m.macros[data[i]] = data[i+1]
			}
		}
		// do not send response
		return nil, nil

	case CodeEOB:
		// call and return milter handler
		return m.backend.Body(newModifier(m))

	case CodeHelo:
		// helo command
		name := strings.TrimSuffix(string(msg.Data), null)
		return m.backend.Helo(name, newModifier(m))

	case CodeHeader:
		// add new header to headers map
		headerData := decodeCStrings(msg.Data)
		// headers with an empty body appear as `text\x00\x00`, decodeCStrings will drop the empty body
		if len(headerData) == 1 {
			headerData = append(headerData, "")
		}
		if len(headerData) == 2 {
			if m.server == nil || !m.server.DiscardHeaders {
				// make sure headers is initialized
				if m.headers == nil {
					m.headers = make(textproto.MIMEHeader)
				}
				m.headers.Add(headerData[0], headerData[1])
			}
			// call and return milter handler
			return m.backend.Header(headerData[0], headerData[1], newModifier(m))
		}

	case CodeMail:
		// envelope from address
		from := readCString(msg.Data)
		return m.backend.MailFrom(strings.Trim(from, "<>"), newModifier(m))

	case CodeEOH:
		// end of headers
		return m.backend.Headers(m.headers, newModifier(m))

	case CodeOptNeg:
		// ignore request and prepare response buffer
		var buffer bytes.Buffer
		// prepare response data
		for _, value := range []uint32{serverProtocolVersion, uint32(m.actions), uint32(m.protocol)} {
			if err := binary.Write(&buffer, binary.BigEndian, value); err != nil {
				return nil, err
			}
		}
		// append requested symlist
		if m.server.Actions&OptSetSymList != 0 {
			for stage, macros := range m.server.SymList {
				binary.Write(&buffer, binary.BigEndian, stage)
				for i, macro := range macros {
					if i != 0 {
						buffer.WriteByte(' ')
					}
					buffer.WriteString(macro)
				}
				buffer.WriteByte(0)
			}
		}
		// build and send packet
		return NewResponse('O', buffer.Bytes()), nil

	case CodeQuit:
		// client requested session close
		return nil, errCloseSession

	case CodeRcpt:
		// envelope to address
		to := readCString(msg.Data)
		return m.backend.RcptTo(strings.Trim(to, "<>"), newModifier(m))

	case CodeData:
		// data, ignore

	default:
		// print error and close session
		log.Printf("Unrecognized command code: %c", msg.Code)
		return nil, errCloseSession
	}

	// by default continue with next milter message
	return RespContinue, nil
}

// HandleMilterComands processes all milter commands in the same connection
func (m *milterSession) HandleMilterCommands() {
	defer func() {
		if v := recover(); v != nil {
			log.Printf("panic handling command: %v\n%s", v, debug.Stack())
		}

		m.conn.Close()
	}()

	for {
		msg, err := m.ReadPacket()
		if err != nil {
			if err != io.EOF {
				log.Printf("Error reading milter command: %v", err)
			}
			return
		}

		resp, err := m.Process(msg)
		if err != nil {
			if err != errCloseSession {
				// log error condition
				log.Printf("Error performing milter command: %v", err)
			}
			return
		}

		// ignore empty responses
		if resp != nil {
			// send back response message
			if err = m.WritePacket(resp.Response()); err != nil {
				log.Printf("Error writing packet: %v", err)
				return
			}

			if !resp.Continue() {
				// prepare backend for next message; the header of the
				// message just answered is not the next one's (spamd
				// patch: it was kept until an abort, so a connection
				// passing many messages grew without bound)
				m.backend = m.server.NewMilter()
				m.headers = nil
			}
		}
	}
}
