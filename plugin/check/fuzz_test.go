package check

import (
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// FuzzFromStruct: whatever a plugin sends back as its result (any google.protobuf.Struct on the
// wire) is decoded into a Result or refused, never a panic.
func FuzzFromStruct(f *testing.F) {
	for _, r := range []Result{{Passed: true, Message: "ok"}, {Message: "refused: sha256:…"}, {}} {
		s, err := toStruct(r)
		if err != nil {
			f.Fatal(err)
		}
		b, err := proto.Marshal(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0x0a, 0x03, 'a', 'b', 'c'})
	f.Fuzz(func(t *testing.T, wire []byte) {
		s := new(structpb.Struct)
		if err := proto.Unmarshal(wire, s); err != nil {
			return
		}
		var res Result
		if err := fromStruct(s, &res); err != nil {
			return
		}
		// A decoded result survives the round trip the other way.
		if _, err := toStruct(res); err != nil {
			t.Fatalf("decoded %+v cannot be encoded again: %v", res, err)
		}
	})
}
