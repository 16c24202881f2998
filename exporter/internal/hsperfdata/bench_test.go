package hsperfdata

import "testing"

func BenchmarkParse(b *testing.B) {
	buf := loadFixture(b, "jdk17-g1")
	for b.Loop() {
		s, _ := Parse(buf)
		s.Int("sun.rt.safepoints")
	}
}

func BenchmarkReparse(b *testing.B) {
	buf := loadFixture(b, "jdk17-g1")
	s, _ := Parse(buf)
	for b.Loop() {
		s2, _ := s.Reparse(buf)
		s2.Int("sun.rt.safepoints")
	}
}

func BenchmarkExercise(b *testing.B) {
	buf := loadFixture(b, "jdk17-g1")
	for b.Loop() {
		exercise(b, buf)
	}
}
