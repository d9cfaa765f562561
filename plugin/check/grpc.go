package check

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
)

// The gRPC service, written by hand rather than generated from a .proto so that building the
// SDK needs no protoc. Requests and responses are google.protobuf.Struct messages, so the wire
// format is plain protobuf and a plugin in another language can implement it from PROTOCOL.md.
const (
	ServiceName = "stagecoach.check.v1.CheckPlugin"
	// CheckMethod is the full gRPC method name of Check.
	CheckMethod = "/" + ServiceName + "/Check"
)

// checkFailedCode is the status code a plugin answers with when its Checker returned an error:
// the check could not be carried out. Transport failures (a crashed plugin) never use it.
const checkFailedCode = codes.Aborted

// Error is returned by the controller-side Checker when the plugin's Checker returned an error.
type Error struct {
	Message string
}

func (e *Error) Error() string { return e.Message }

// GRPCPlugin is the go-plugin glue: the server side serves Impl, the client side returns a
// Checker that calls the plugin over gRPC.
type GRPCPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	Impl Checker
}

var _ plugin.GRPCPlugin = (*GRPCPlugin)(nil)

// GRPCServer registers the check service.
func (p *GRPCPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	if p.Impl == nil {
		return errors.New("check plugin served without a Checker: pass your implementation to check.Serve")
	}
	s.RegisterService(&serviceDesc, p.Impl)
	return nil
}

// GRPCClient returns a Checker that calls the plugin.
func (p *GRPCPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, cc *grpc.ClientConn) (any, error) {
	return &grpcClient{conn: cc}, nil
}

var serviceDesc = grpc.ServiceDesc{
	ServiceName: ServiceName,
	HandlerType: (*Checker)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Check",
		Handler:    checkHandler,
	}},
	Metadata: "plugin/check/PROTOCOL.md",
}

func checkHandler(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	in := new(structpb.Struct)
	if err := dec(in); err != nil {
		return nil, err
	}
	call := func(ctx context.Context, raw any) (any, error) {
		var req Request
		if err := fromStruct(raw.(*structpb.Struct), &req); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "check request: %v", err)
		}
		res, err := srv.(Checker).Check(ctx, req)
		if err != nil {
			return nil, status.Error(checkFailedCode, err.Error())
		}
		return toStruct(res)
	}
	if interceptor == nil {
		return call(ctx, in)
	}
	return interceptor(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: CheckMethod}, call)
}

type grpcClient struct {
	conn *grpc.ClientConn
}

func (c *grpcClient) Check(ctx context.Context, req Request) (Result, error) {
	in, err := toStruct(req)
	if err != nil {
		return Result{}, err
	}
	out := new(structpb.Struct)
	if err := c.conn.Invoke(ctx, CheckMethod, in, out); err != nil {
		if s, ok := status.FromError(err); ok && s.Code() == checkFailedCode {
			return Result{}, &Error{Message: s.Message()}
		}
		return Result{}, err
	}
	var res Result
	if err := fromStruct(out, &res); err != nil {
		return Result{}, fmt.Errorf("plugin answered a malformed check result: %w", err)
	}
	return res, nil
}

// toStruct and fromStruct map the Go types to google.protobuf.Struct through their JSON form,
// so the JSON field names are the wire field names.
func toStruct(v any) (*structpb.Struct, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	s := new(structpb.Struct)
	if err := protojson.Unmarshal(b, s); err != nil {
		return nil, err
	}
	return s, nil
}

func fromStruct(s *structpb.Struct, v any) error {
	b, err := protojson.Marshal(s)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}
