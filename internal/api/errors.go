package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Error is every non-2xx answer: {"code":403,"reason":"Forbidden","message":"..."}.
type Error struct {
	Code    int    `json:"code"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return e.Message }

func tooLarge(limit int64) *Error {
	return &Error{Code: http.StatusRequestEntityTooLarge, Reason: "RequestEntityTooLarge",
		Message: fmt.Sprintf("the request body is larger than %d bytes", limit)}
}

// toError turns an error into the answer: an API server's refusal keeps its code, reason and
// message (the admission policies and RBAC name the fix); a spent deadline is 504; what the
// request itself got wrong (an unknown version, a missing reason) is 400.
func toError(ctx context.Context, err error) *Error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return &Error{Code: http.StatusGatewayTimeout, Reason: "Timeout", Message: "the request took too long and was stopped: " + err.Error()}
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return tooLarge(tooBig.Limit)
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		s := status.Status()
		code := int(s.Code)
		if code == 0 {
			code = http.StatusInternalServerError
		}
		reason := string(s.Reason)
		if reason == "" {
			reason = http.StatusText(code)
		}
		return &Error{Code: code, Reason: reason, Message: s.Message}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return &Error{Code: http.StatusGatewayTimeout, Reason: "Timeout", Message: "the request took too long and was stopped: " + err.Error()}
	}
	return &Error{Code: http.StatusBadRequest, Reason: "BadRequest", Message: err.Error()}
}

func writeError(w http.ResponseWriter, e *Error) {
	writeJSON(w, e.Code, e)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// decode reads a JSON body into v; an empty body leaves v as it is.
func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	if err := dec.Decode(v); err != nil && !errors.Is(err, io.EOF) {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return tooLarge(tooBig.Limit)
		}
		return &Error{Code: http.StatusBadRequest, Reason: "BadRequest", Message: "the request body is not the JSON this action takes: " + err.Error()}
	}
	return nil
}
