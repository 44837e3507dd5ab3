package proxy_test

import (
	"net/http"
	"slices"
	"testing"

	"github.com/intentius/boxbroker/internal/proxy"
)

// TestMethodParams: the _method values a host may read in a request,
// wherever one reads them, and the names PHP registers as _method; and
// the body types a host may read one from (MethodParamBody), among them
// any whose Content-Type holds "/json" or "+json", in a parameter too,
// which Laravel reads as JSON.
func TestMethodParams(t *testing.T) {
	const mp = "multipart/form-data; boundary=b"
	tests := []struct {
		name, query, ct, body string
		want                  []string
		err                   bool
	}{
		{"none", "a=1", "application/x-www-form-urlencoded", "b=2", nil, false},
		{"the query", "_method=DELETE", "", "", []string{"DELETE"}, false},
		{"the query, empty", "_method", "", "", []string{""}, false},
		{"a form", "", "application/x-www-form-urlencoded; charset=utf-8", "a=1&_method=PUT", []string{"PUT"}, false},
		{"a form, after a ;", "", "application/x-www-form-urlencoded", "a=1;_method=PUT", []string{"PUT"}, false},
		{"a form with a bad escape elsewhere", "", "application/x-www-form-urlencoded", "a=%zz&_method=PUT", []string{"PUT"}, false},
		{"an untyped body", "", "", "_method=PATCH", []string{"PATCH"}, false},
		{"a form that is valid JSON", "", "application/x-www-form-urlencoded", `"a&_method=PUT&b"`, []string{"PUT"}, false},
		{"an untyped body that is JSON", "", "", `{"_method":"PUT"}`, []string{"PUT"}, false},
		{"PHP's dot", "", "application/x-www-form-urlencoded", ".method=DELETE", []string{"DELETE"}, false},
		{"PHP's leading space and array", "+_method[]=DELETE", "", "", []string{"DELETE"}, false},
		{"PHP's name cut at a NUL", "_method%00x=DELETE", "", "", []string{"DELETE"}, false},
		{"PHP's name cut at a NUL, in a form", "", "application/x-www-form-urlencoded", "a=1&_method%00=DELETE", []string{"DELETE"}, false},
		{"not PHP's", "", "application/x-www-form-urlencoded", "x_method=DELETE&_Method=DELETE", nil, false},
		{"a multipart part", "", mp, "--b\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n1\r\n--b\r\nContent-Disposition: form-data; name=\"_method\"\r\n\r\nDELETE\r\n--b--\r\n", []string{"DELETE"}, false},
		{"a multipart part named by its Content-ID, as Rack reads it", "", mp, "--b\r\nContent-ID: _method\r\n\r\nDELETE\r\n--b--\r\n", []string{"DELETE"}, false},
		{"a multipart name in single quotes, as PHP reads it", "", mp, "--b\r\nContent-Disposition: form-data; name='_method'\r\n\r\nDELETE\r\n--b--\r\n", []string{"DELETE"}, false},
		{"a multipart name inside another parameter, as Rack 2 and 3.0 read it", "", mp, "--b\r\nContent-Disposition: form-data; x=\"; name=_method\"; name=\"a\"\r\n\r\nDELETE\r\n--b--\r\n", []string{"DELETE"}, false},
		{"a multipart name in another header line, as Rack 2 reads it", "", mp, "--b\r\nContent-Disposition: form-data;name=\"a\"\r\nX-A: Content-Disposition: x name=_method\r\n\r\nDELETE\r\n--b--\r\n", []string{"DELETE"}, false},
		{"a multipart file's name is none", "", mp, "--b\r\nContent-Disposition: form-data; name=\"f\"; filename=\"_method\"\r\n\r\nDELETE\r\n--b--\r\n", nil, false},
		{"a multipart body that does not read", "", mp, "--b\r\nContent-Disposition: form-data; name=\"_method\"\r\n\r\nDELETE", nil, true},
		{"JSON, twice, and not a string", "", "application/json", `{"_method":"POST","a":{"_method":"GET"},"_method":"DELETE","_method":["PUT"]}`, []string{"POST", "DELETE", `["PUT"]`}, false},
		{"JSON of any type", "", "text/plain", `{"_method":"DELETE"}`, []string{"DELETE"}, false},
		{"a body of another type", "", "application/octet-stream", "_method=DELETE", nil, false},
		{"a Content-Type that does not parse", "", "multipart/form-data x; boundary=b", "--b\r\nContent-Disposition: form-data; name=\"_method\"\r\n\r\nDELETE\r\n--b--\r\n", nil, true},
		{"a multipart type that loses its boundary", "", "multipart/form-data; boundary=b; x=\"", "--b\r\nContent-Disposition: form-data; name=\"_method\"\r\n\r\nDELETE\r\n--b--\r\n", nil, true},
		{"the query and the body", "_method=GET", "application/json", `{"_method":"DELETE"}`, []string{"GET", "DELETE"}, false},
	}
	for _, tt := range tests {
		got, err := proxy.MethodParams(tt.query, tt.ct, []byte(tt.body))
		if (err != nil) != tt.err {
			t.Errorf("%s: MethodParams error = %v, want error %v", tt.name, err, tt.err)
		}
		if !tt.err && !slices.Equal(got, tt.want) {
			t.Errorf("%s: MethodParams = %q, want %q", tt.name, got, tt.want)
		}
	}
	for _, ct := range []string{"", "application/x-www-form-urlencoded", "multipart/mixed; boundary=b", "application/json", "application/vnd.api+json",
		`text/plain; x="/json"`, "application/octet-stream; profile=a+json", "TEXT/PLAIN; X=/JSON"} {
		if !proxy.MethodParamBody(ct) {
			t.Errorf("MethodParamBody(%q) = false, want true", ct)
		}
	}
	for _, ct := range []string{"application/octet-stream", "text/plain", "image/png", "application/x-ndjson"} {
		if proxy.MethodParamBody(ct) {
			t.Errorf("MethodParamBody(%q) = true, want false", ct)
		}
	}
}

// TestBodyType: a Content-Type Go's parser does not read, which PHP or
// Rack may read as multipart or a form, is an error, and so is one whose
// boundary PHP or Rack reads as another; none is no type.
func TestBodyType(t *testing.T) {
	for _, tt := range []struct {
		ct, mt, boundary string
		err              bool
	}{
		{"", "", "", false},
		{"Multipart/Form-Data; boundary=b", "multipart/form-data", "b", false},
		{"multipart/form-data; boundary=b; x=\"", "multipart/form-data", "", false},
		{"multipart/form-data x; boundary=b", "", "", true},
		{"multipart/form-data, text/plain; boundary=b", "", "", true},
		{"multipart/form-data; boundary=a; boundary=b", "", "", true},
		{" ", "", "", true},
		{"multipart/form-data; boundary=----WebKitFormBoundaryAbC", "multipart/form-data", "----WebKitFormBoundaryAbC", false},
		{`multipart/form-data; boundary="b"; charset=utf-8`, "multipart/form-data", "b", false},
		{"multipart/form-data; BOUNDARY=b", "multipart/form-data", "b", false},
		{"multipart/form-data; xboundary=evil; boundary=b", "", "", true},
		{"multipart/form-data; boundary=b; xboundary=evil", "", "", true},
		{`multipart/form-data; x="boundary=evil"; boundary=b`, "", "", true},
		{"multipart/form-data; boundary*0=a; boundary*1=b", "", "", true},
	} {
		mt, params, err := proxy.BodyType(tt.ct)
		if mt != tt.mt || params["boundary"] != tt.boundary || (err != nil) != tt.err {
			t.Errorf("BodyType(%q) = %q, boundary %q, error %v; want %q, %q, error %v", tt.ct, mt, params["boundary"], err, tt.mt, tt.boundary, tt.err)
		}
	}
}

// TestContentType: a Content-Type given twice, which hosts read as the
// first, the last or both joined, is an error.
func TestContentType(t *testing.T) {
	for _, tt := range []struct {
		vs   []string
		want string
		err  bool
	}{
		{nil, "", false},
		{[]string{"application/json"}, "application/json", false},
		{[]string{"multipart/form-data; boundary=a", "multipart/form-data; boundary=b"}, "multipart/form-data; boundary=a", true},
	} {
		got, err := proxy.ContentType(http.Header{"Content-Type": tt.vs})
		if got != tt.want || (err != nil) != tt.err {
			t.Errorf("ContentType(%q) = %q, error %v; want %q, error %v", tt.vs, got, err, tt.want, tt.err)
		}
	}
}
