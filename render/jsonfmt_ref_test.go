package render

// indentJSON lays out compact JSON for review in a diff: a container that
// holds only plain values and lists of plain values (an endpoint, a DNS
// record, a variable, a list of addresses) stays on one line; others get
// one member per line, indented by two spaces. A plan of 10,000 services
// then has one line per endpoint instead of fifteen.
//
// PlanJSON lays plan.json out this way as it writes it (see jsonWriter);
// indentJSON is the definition the tests hold it to.
func indentJSON(compact []byte) []byte {
	inline := simpleContainers(compact)
	out := make([]byte, 0, len(compact)+len(compact)/4)
	var open []bool // per open container: kept on one line
	next := 0       // index into inline of the next container to open
	for i := 0; i < len(compact); i++ {
		c := compact[i]
		switch c {
		case '"':
			j := skipString(compact, i)
			out = append(out, compact[i:j]...)
			i = j - 1
		case '{', '[':
			out = append(out, c)
			in := inline[next]
			next++
			open = append(open, in)
			if !in {
				out = newline(out, len(open))
			}
		case '}', ']':
			in := open[len(open)-1]
			open = open[:len(open)-1]
			if !in {
				out = newline(out, len(open))
			}
			out = append(out, c)
		case ',':
			out = append(out, c)
			if open[len(open)-1] {
				out = append(out, ' ')
			} else {
				out = newline(out, len(open))
			}
		case ':':
			out = append(out, ':', ' ')
		default:
			out = append(out, c)
		}
	}
	return append(out, '\n')
}

// simpleContainers tells, for every container in the order they open,
// whether it holds only plain values and lists of plain values.
func simpleContainers(b []byte) []bool {
	type state struct {
		index  int  // position in the result
		list   bool // a list, not an object
		plain  bool // holds no container at all
		simple bool
	}
	var res []bool
	var stack []state
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '"':
			i = skipString(b, i) - 1
		case '{', '[':
			if n := len(stack); n > 0 {
				stack[n-1].plain = false
			}
			stack = append(stack, state{index: len(res), list: b[i] == '[', plain: true, simple: true})
			res = append(res, true)
		case '}', ']':
			s := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			res[s.index] = s.simple
			if n := len(stack); n > 0 && !(s.list && s.plain) {
				stack[n-1].simple = false
			}
		}
	}
	return res
}

// skipString returns the index after the string that starts at i.
func skipString(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(b)
}
