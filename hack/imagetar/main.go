// Command imagetar writes a container image as a docker-archive tarball (the
// format `docker save` writes and `ctr images import` reads) from a root
// filesystem directory: one layer, no registry, no daemon. The cluster script
// builds every image its nodes run with it, because this machine reaches no
// image registry.
//
//	imagetar -rootfs DIR -tag NAME:TAG [-dockerfile Dockerfile] [-entrypoint /x] [-cmd a,b] -o OUT.tar
//
// With -dockerfile the image's ENV, USER, ENTRYPOINT and CMD are read from the
// final stage of that Dockerfile (JSON forms only), so the project's image is
// configured by the one file that also builds it with docker or podman.
package main

import (
	"archive/tar"
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// imageConfig is the part of the OCI image configuration the runtime reads.
type imageConfig struct {
	Env        []string `json:"Env,omitempty"`
	Entrypoint []string `json:"Entrypoint,omitempty"`
	Cmd        []string `json:"Cmd,omitempty"`
	User       string   `json:"User,omitempty"`
	WorkingDir string   `json:"WorkingDir,omitempty"`
}

func main() {
	rootfs := flag.String("rootfs", "", "directory holding the image's root filesystem")
	tag := flag.String("tag", "", "image reference, e.g. registry.k8s.io/pause:3.10.2")
	dockerfile := flag.String("dockerfile", "", "read ENV, USER, ENTRYPOINT and CMD from this Dockerfile's final stage")
	entrypoint := flag.String("entrypoint", "", "entrypoint, comma-separated")
	cmd := flag.String("cmd", "", "command, comma-separated")
	out := flag.String("o", "", "output tarball")
	flag.Parse()
	if *rootfs == "" || *tag == "" || *out == "" {
		flag.Usage()
		os.Exit(2)
	}
	cfg := imageConfig{Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}}
	if *dockerfile != "" {
		var err error
		if cfg, err = readDockerfile(*dockerfile); err != nil {
			log.Fatal(err)
		}
	}
	if *entrypoint != "" {
		cfg.Entrypoint = strings.Split(*entrypoint, ",")
	}
	if *cmd != "" {
		cfg.Cmd = strings.Split(*cmd, ",")
	}
	if err := write(*out, *rootfs, *tag, cfg); err != nil {
		log.Fatal(err)
	}
}

// readDockerfile reads the configuration instructions of the last FROM stage.
func readDockerfile(path string) (imageConfig, error) {
	f, err := os.Open(path)
	if err != nil {
		return imageConfig{}, err
	}
	defer f.Close()
	var cfg imageConfig
	s := bufio.NewScanner(f)
	for s.Scan() {
		line := strings.TrimSpace(s.Text())
		word, rest, _ := strings.Cut(line, " ")
		rest = strings.TrimSpace(rest)
		switch strings.ToUpper(word) {
		case "FROM":
			cfg = imageConfig{}
		case "ENV":
			k, v, ok := strings.Cut(rest, "=")
			if !ok {
				return cfg, fmt.Errorf("%s: ENV %q: only the KEY=VALUE form is read", path, rest)
			}
			cfg.Env = append(cfg.Env, k+"="+v)
		case "USER":
			cfg.User = rest
		case "WORKDIR":
			cfg.WorkingDir = rest
		case "ENTRYPOINT", "CMD":
			var argv []string
			if err := json.Unmarshal([]byte(rest), &argv); err != nil {
				return cfg, fmt.Errorf("%s: %s %s: only the JSON form is read", path, word, rest)
			}
			if strings.ToUpper(word) == "ENTRYPOINT" {
				cfg.Entrypoint = argv
			} else {
				cfg.Cmd = argv
			}
		}
	}
	return cfg, s.Err()
}

// write lays out the archive: the layer, the config naming the layer's
// digest, and manifest.json naming both and the tag.
func write(out, rootfs, tag string, cfg imageConfig) error {
	dir, err := os.MkdirTemp(filepath.Dir(out), ".imagetar-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	layerDigest, err := writeLayer(filepath.Join(dir, "layer.tar"), rootfs)
	if err != nil {
		return err
	}
	config, err := json.Marshal(map[string]any{
		"architecture": "amd64",
		"os":           "linux",
		"created":      time.Unix(0, 0).UTC(),
		"config":       cfg,
		"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + layerDigest}},
	})
	if err != nil {
		return err
	}
	sum := sha256.Sum256(config)
	configName := hex.EncodeToString(sum[:]) + ".json"
	manifest, err := json.Marshal([]map[string]any{{
		"Config": configName, "RepoTags": []string{tag}, "Layers": []string{layerDigest + "/layer.tar"},
	}})
	if err != nil {
		return err
	}

	f, err := os.Create(out)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	addBytes := func(name string, b []byte) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err := tw.Write(b)
		return err
	}
	if err := addBytes(configName, config); err != nil {
		return err
	}
	if err := addFile(tw, layerDigest+"/layer.tar", filepath.Join(dir, "layer.tar")); err != nil {
		return err
	}
	if err := addBytes("manifest.json", manifest); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return f.Close()
}

func addFile(tw *tar.Writer, name, path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: st.Size(), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(tw, f)
	return err
}

// writeLayer tars rootfs (owned by root, times zeroed, so the same tree gives
// the same digest) and returns the tar's sha256, which is also its diff ID.
func writeLayer(path, rootfs string) (string, error) {
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	tw := tar.NewWriter(io.MultiWriter(f, h))
	var paths []string
	err = filepath.WalkDir(rootfs, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != rootfs {
			paths = append(paths, p)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	sort.Strings(paths)
	for _, p := range paths {
		st, err := os.Lstat(p)
		if err != nil {
			return "", err
		}
		link := ""
		if st.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return "", err
			}
		}
		hdr, err := tar.FileInfoHeader(st, link)
		if err != nil {
			return "", err
		}
		rel, _ := filepath.Rel(rootfs, p)
		hdr.Name = filepath.ToSlash(rel)
		if st.IsDir() {
			hdr.Name += "/"
		}
		hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", ""
		hdr.ModTime, hdr.AccessTime, hdr.ChangeTime = time.Unix(0, 0), time.Time{}, time.Time{}
		hdr.Format = tar.FormatPAX
		if err := tw.WriteHeader(hdr); err != nil {
			return "", err
		}
		if st.Mode().IsRegular() {
			src, err := os.Open(p)
			if err != nil {
				return "", err
			}
			_, err = io.Copy(tw, src)
			src.Close()
			if err != nil {
				return "", err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
