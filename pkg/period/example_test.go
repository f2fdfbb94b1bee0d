package period_test

import (
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/energyscope/servingsnap/pkg/period"
)

func ExampleColumn() {
	b := array.NewDictionaryBuilder(memory.DefaultAllocator,
		&arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int16, ValueType: arrow.BinaryTypes.String}).(*array.BinaryDictionaryBuilder)
	defer b.Release()
	for _, s := range []string{"2019-Q1", "2019-Q1", "2019-Q2", "2019-Q5"} {
		_ = b.AppendString(s)
	}
	arr := b.NewArray()
	defer arr.Release()

	dst := make([]int32, arr.Len())
	err := period.Column(arr, dst)
	var rowErr *period.RowError
	if errors.As(err, &rowErr) {
		fmt.Println(err)
		fmt.Println("converted before it:", period.Format(dst[0]), period.Format(dst[1]), period.Format(dst[2]))
	}
	// Output:
	// row 3: period "2019-Q5": quarter 5 out of range 1-4
	// converted before it: 2019-01-01 2019-01-01 2019-04-01
}
