package adminapi

import "testing"

func TestBaseURL(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:7422":          "https://127.0.0.1:7422",
		"https://10.0.0.2:7422":   "https://10.0.0.2:7422",
		"https://h:1/ignored":     "https://h:1",
		"https://[::1]:7422/v1/x": "https://[::1]:7422",
	} {
		if got, err := BaseURL(in); err != nil || got != want {
			t.Errorf("BaseURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "https://", "host", "gopher://h:1", "http://10.0.0.2:7422"} {
		if got, err := BaseURL(in); err == nil {
			t.Errorf("BaseURL(%q) = %q, want error", in, got)
		}
	}
}
